-- Subscriptions (issue 22): several receivers of one queue, each a queue row of its own
-- (named `<queue>~<subscription>`) with its own narrow delivery rows; the body is stored once.
-- body_id: NULL for an unshared row (its body has the row's own id, the hot path as before);
-- set for a row whose body is shared, counted by message_bodies.deliveries.
ALTER TABLE messages ADD COLUMN body_id INTEGER;
ALTER TABLE message_bodies ADD COLUMN deliveries INTEGER NOT NULL DEFAULT 1;

DROP TRIGGER message_bodies_follow_messages;
CREATE TRIGGER message_bodies_follow_messages AFTER DELETE ON messages WHEN old.body_id IS NULL
BEGIN
    DELETE FROM message_bodies WHERE id = old.id;
END;

-- A shared body goes with its last delivery.
CREATE TRIGGER shared_bodies_follow_deliveries AFTER DELETE ON messages WHEN old.body_id IS NOT NULL
BEGIN
    UPDATE message_bodies SET deliveries = deliveries - 1 WHERE id = old.body_id;
    DELETE FROM message_bodies WHERE id = old.body_id AND deliveries <= 0;
END;
