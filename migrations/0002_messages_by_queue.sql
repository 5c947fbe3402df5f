-- Browse pages through a queue in send order with a keyset cursor (the last row id seen):
-- without this index a page from a deep queue sorted the whole queue (525 ms at 1,000,000
-- messages); with it a page costs the same at any depth. Its cost on the send path is in
-- docs/benchmarks.md ("Reads beside writes").
CREATE INDEX messages_by_queue ON messages (queue_id, id);
