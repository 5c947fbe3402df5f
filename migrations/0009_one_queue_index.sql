-- One index finds a queue's messages by row id and by age, where there were two: messages_by_queue
-- (queue_id, id) for browsing in send order and counting, and messages_by_enqueue (queue_id,
-- enqueued_at_ms) for retention. Every send and every delete wrote both. The enqueue time rides along
-- in messages_by_queue, so the counts read it from the index (the expired and the oldest message in
-- the same pass that counts the queue), and the retention sweep removes a queue's expired messages
-- from its oldest rows on (storage/message_store.py: delete_expired). Its cost is in
-- docs/benchmarks.md ("Receive path").
DROP INDEX messages_by_enqueue;
DROP INDEX messages_by_queue;
CREATE INDEX messages_by_queue ON messages (queue_id, id, enqueued_at_ms);
