-- Subscriptions, cheaper: a shared body counts its deliveries instead of finding them
-- through messages_by_body, so that a delivery row carries no index entry beyond what any narrow
-- row has (docs/benchmarks.md, "Subscriptions: the cost per message against one narrow row").
-- deliveries: how many messages rows point at the body through body_id (set at fan-out, in the same
-- INSERT); NULL for a body of its own row alone (body_id NULL: every queue without subscriptions).
-- Nullable on purpose: an UPDATE in a trigger on messages that may fail a NOT NULL constraint makes
-- every DELETE on messages open a statement journal (3.5 -> 11.5 µs a DELETE, even when the trigger
-- does not fire); a nullable column costs deletes without subscriptions nothing.
ALTER TABLE message_bodies ADD COLUMN deliveries INTEGER;

UPDATE message_bodies SET deliveries = shared.n
FROM (SELECT body_id, count(*) AS n FROM messages WHERE body_id IS NOT NULL GROUP BY body_id) AS shared
WHERE message_bodies.id = shared.body_id;

DROP TRIGGER shared_bodies_follow_deliveries;
DROP INDEX messages_by_body;

-- A shared body goes with its last delivery (message_bodies_follow_messages of 0003 still takes
-- the body of a row with none: body_id NULL).
CREATE TRIGGER shared_bodies_follow_deliveries AFTER DELETE ON messages WHEN old.body_id IS NOT NULL
BEGIN
    DELETE FROM message_bodies WHERE id = old.body_id AND deliveries = 1;
    UPDATE message_bodies SET deliveries = deliveries - 1 WHERE id = old.body_id;
END;
