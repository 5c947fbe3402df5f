-- Subscriptions: several receivers of one queue, each a queue row of its own
-- (named `<queue>~<subscription>`) with its own narrow delivery rows; the body is stored once.
-- body_id: NULL for an unshared row (its body has the row's own id: the hot path as before);
-- set on every row that shares a body (the queue's own row too, body_id = id).
ALTER TABLE messages ADD COLUMN body_id INTEGER;
-- Partial: rows without a shared body (all of them on queues without subscriptions) pay nothing.
CREATE INDEX messages_by_body ON messages (body_id) WHERE body_id IS NOT NULL;

-- Only DELETEs in these triggers, then; migration 0004 found that an UPDATE costs nothing when it cannot
-- fail a NOT NULL (docs/benchmarks.md, "Subscriptions").
DROP TRIGGER message_bodies_follow_messages;
CREATE TRIGGER message_bodies_follow_messages AFTER DELETE ON messages WHEN old.body_id IS NULL
BEGIN
    DELETE FROM message_bodies WHERE id = old.id;
END;

-- A shared body goes with its last delivery.
CREATE TRIGGER shared_bodies_follow_deliveries AFTER DELETE ON messages WHEN old.body_id IS NOT NULL
BEGIN
    DELETE FROM message_bodies WHERE id = old.body_id
        AND NOT EXISTS (SELECT 1 FROM messages INDEXED BY messages_by_body WHERE body_id = old.body_id);
END;
