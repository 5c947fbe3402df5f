-- Subscriptions (issue 22), cheaper: the queue's own row of a fanned-out message (body_id = id, the
-- body's own row) leaves messages_by_body, so that a subscription adds one narrow row and one index
-- entry per message, not two (scripts/BENCHMARKS.md, "Subscriptions: the cost per message").
-- That row is found by its primary key instead: it is the one whose id is its body_id.
DROP INDEX messages_by_body;
CREATE INDEX messages_by_body ON messages (body_id) WHERE body_id IS NOT NULL AND body_id <> id;

DROP TRIGGER shared_bodies_follow_deliveries;
CREATE TRIGGER shared_bodies_follow_deliveries AFTER DELETE ON messages WHEN old.body_id IS NOT NULL
BEGIN
    DELETE FROM message_bodies WHERE id = old.body_id
        AND NOT EXISTS (SELECT 1 FROM messages WHERE id = old.body_id AND body_id = old.body_id)
        AND NOT EXISTS (SELECT 1 FROM messages INDEXED BY messages_by_body
                        WHERE body_id = old.body_id AND body_id <> id);
END;
