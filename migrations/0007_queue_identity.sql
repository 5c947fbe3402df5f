-- A queue's identity is never handed on. Queue ids come from AUTOINCREMENT, so a queue created after
-- another was deleted never gets its id: nothing keyed by queue id (a move task, a receipt handle,
-- counts and caches in memory) can pass from a deleted queue to a new one.
-- The deduplication scope in force is the one the queue was created with: SQS reports a later
-- DeduplicationScope set through SetQueueAttributes but keeps deduplicating as before.
CREATE TABLE queues_keeping_ids (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    region              TEXT    NOT NULL,
    account             TEXT    NOT NULL,
    name                TEXT    NOT NULL,
    fifo                INTEGER NOT NULL,
    attributes          TEXT    NOT NULL,  -- JSON object of the settable attributes, as SQS strings
    tags                TEXT    NOT NULL,  -- JSON object
    created_at_ms       INTEGER NOT NULL,
    modified_at_ms      INTEGER NOT NULL,
    deduplication_scope TEXT    NOT NULL DEFAULT 'queue',  -- 'queue' or 'messageGroup', set at creation only
    UNIQUE (region, account, name)
) STRICT;

-- A queue made before this migration deduplicates in the scope it has now (its creation's is not known).
INSERT INTO queues_keeping_ids (id, region, account, name, fifo, attributes, tags, created_at_ms, modified_at_ms,
                                deduplication_scope)
SELECT id, region, account, name, fifo, attributes, tags, created_at_ms, modified_at_ms,
       CASE json_extract(attributes, '$.DeduplicationScope') WHEN 'messageGroup' THEN 'messageGroup' ELSE 'queue' END
FROM queues;

DROP TABLE queues;
ALTER TABLE queues_keeping_ids RENAME TO queues;

-- Ids already given to queues that are gone but still named somewhere (a move task, messages) are
-- never given again either.
INSERT INTO sqlite_sequence (name, seq)
SELECT 'queues', 0 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'queues');
UPDATE sqlite_sequence SET seq = max(seq,
    coalesce((SELECT max(id) FROM queues), 0),
    coalesce((SELECT max(source_queue_id) FROM move_tasks), 0),
    coalesce((SELECT max(queue_id) FROM messages), 0),
    coalesce((SELECT max(queue_id) FROM deduplication), 0),
    coalesce((SELECT max(queue_id) FROM receive_attempts), 0))
WHERE name = 'queues';

-- A queue's move tasks are found by the queue (not its ARN, which a new queue of the same name shares).
CREATE INDEX move_tasks_by_source_queue ON move_tasks (source_queue_id, id);
DROP INDEX move_tasks_by_source;

-- A task whose source queue is gone (deleted before deleting a queue ended its tasks) has ended.
UPDATE move_tasks SET status = 'FAILED', failure_reason = 'The source queue ' || source_arn || ' was deleted.'
WHERE status IN ('RUNNING', 'CANCELLING') AND NOT EXISTS (
    SELECT 1 FROM queues q WHERE q.id = move_tasks.source_queue_id
      AND 'arn:aws:sqs:' || q.region || ':' || q.account || ':' || q.name = move_tasks.source_arn);
