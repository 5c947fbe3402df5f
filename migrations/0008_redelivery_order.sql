-- Among visible messages SQS prefers older sends: a message whose visibility ended comes back before
-- one sent after it was received. The visibility index is split in two partial indexes, messages
-- received at least once and messages never received, so that a claim takes the received ones first
-- and then the others, each in the order they became visible: two index ranges, each read only as far
-- as the claim takes (the claim stays O(batch)). A row moves from one to the other at its first
-- receive, where the claim rewrote its index entry anyway. receive_count rides along so that the counts
-- (visible, in flight, delayed) are still read from the indexes alone. Its cost is in
-- docs/benchmarks.md ("Redelivery order").
DROP INDEX messages_by_visibility;
CREATE INDEX messages_received_by_visibility ON messages (queue_id, visible_at_ms, id, receive_count)
    WHERE receive_count > 0;
CREATE INDEX messages_unreceived_by_visibility ON messages (queue_id, visible_at_ms, id, receive_count)
    WHERE receive_count = 0;
