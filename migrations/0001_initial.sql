-- The first schema: queues, the hot message rows, their immutable payloads,
-- FIFO deduplication and receive attempts, and dead-letter move tasks.

CREATE TABLE settings (
    key   TEXT PRIMARY KEY,
    value BLOB NOT NULL
) STRICT;

CREATE TABLE queues (
    id             INTEGER PRIMARY KEY,
    region         TEXT    NOT NULL,
    account        TEXT    NOT NULL,
    name           TEXT    NOT NULL,
    fifo           INTEGER NOT NULL,
    attributes     TEXT    NOT NULL,  -- JSON object of the settable attributes, as SQS strings
    tags           TEXT    NOT NULL,  -- JSON object
    created_at_ms  INTEGER NOT NULL,
    modified_at_ms INTEGER NOT NULL,
    UNIQUE (region, account, name)
) STRICT;

-- Narrow and hot: the claim rewrites these rows, so the payload lives apart.
-- The row id is also the message's place in its queue: FIFO order and SequenceNumber.
-- AUTOINCREMENT: ids of deleted messages are never handed out again, even after a restart.
CREATE TABLE messages (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    queue_id             INTEGER NOT NULL,
    visible_at_ms        INTEGER NOT NULL,
    enqueued_at_ms       INTEGER NOT NULL,  -- retention counts from here
    receive_count        INTEGER NOT NULL DEFAULT 0,
    first_received_at_ms INTEGER NOT NULL DEFAULT 0,  -- 0: never received
    received_at_ms       INTEGER NOT NULL DEFAULT 0,  -- the latest receive, for the 12-hour cap
    receipt_token        INTEGER NOT NULL DEFAULT 0,  -- rotated by every receive
    group_id             TEXT
) STRICT;

CREATE INDEX messages_by_visibility ON messages (queue_id, visible_at_ms, id);
CREATE INDEX messages_by_enqueue ON messages (queue_id, enqueued_at_ms);
-- Messages with a group (FIFO and fair queues) are also found group by group: FIFO
-- queues look at the front of the queue in send order to find groups, then take each
-- group's messages in order; fair queues take each group's visible messages in turn.
-- All three are partial: messages without a group (most standard traffic) pay for none.
CREATE INDEX messages_in_send_order ON messages (queue_id, id, group_id) WHERE group_id IS NOT NULL;
CREATE INDEX messages_by_group ON messages (queue_id, group_id, id) WHERE group_id IS NOT NULL;
CREATE INDEX messages_by_group_visibility ON messages (queue_id, group_id, visible_at_ms, id)
    WHERE group_id IS NOT NULL;

-- Written once at send, read by id after the claim.
CREATE TABLE message_bodies (
    id                     INTEGER PRIMARY KEY,  -- the messages row
    message_id             TEXT    NOT NULL,
    body                   TEXT    NOT NULL,
    md5_of_body            TEXT    NOT NULL,
    attributes             TEXT,              -- JSON, the wire shape
    trace_header           TEXT,
    sent_at_ms             INTEGER NOT NULL,
    sender_id              TEXT    NOT NULL,
    deduplication_id       TEXT,
    dead_letter_source_arn TEXT
) STRICT;

CREATE TRIGGER message_bodies_follow_messages AFTER DELETE ON messages
BEGIN
    DELETE FROM message_bodies WHERE id = old.id;
END;

-- FIFO: a deduplication id is remembered for 5 minutes, even after the delete.
CREATE TABLE deduplication (
    queue_id        INTEGER NOT NULL,
    scope           TEXT    NOT NULL,  -- '' for the queue, else the message group
    deduplication_id TEXT   NOT NULL,
    expires_at_ms   INTEGER NOT NULL,
    message_id      TEXT    NOT NULL,
    sequence_number TEXT    NOT NULL,
    PRIMARY KEY (queue_id, scope, deduplication_id)
) STRICT, WITHOUT ROWID;

-- FIFO: a retried receive with the same ReceiveRequestAttemptId gets the same messages.
CREATE TABLE receive_attempts (
    queue_id      INTEGER NOT NULL,
    attempt_id    TEXT    NOT NULL,
    expires_at_ms INTEGER NOT NULL,
    receipts      TEXT    NOT NULL,  -- JSON list of [row id, token]
    PRIMARY KEY (queue_id, attempt_id)
) STRICT, WITHOUT ROWID;

-- Dead-letter redrive tasks; a running task survives a restart and carries on.
CREATE TABLE move_tasks (
    id                INTEGER PRIMARY KEY,
    handle            TEXT    NOT NULL UNIQUE,
    source_queue_id   INTEGER NOT NULL,
    source_arn        TEXT    NOT NULL,
    destination_arn   TEXT,
    rate              INTEGER,           -- MaxNumberOfMessagesPerSecond, NULL: as fast as it goes
    status            TEXT    NOT NULL,  -- RUNNING, CANCELLING, CANCELLED, COMPLETED, FAILED
    last_row_id       INTEGER NOT NULL,  -- the task moves messages up to this row, sent before it started
    moved             INTEGER NOT NULL DEFAULT 0,
    to_move           INTEGER NOT NULL,
    failure_reason    TEXT,
    started_at_ms     INTEGER NOT NULL
) STRICT;
CREATE INDEX move_tasks_by_source ON move_tasks (source_arn, id);
