-- The first schema: queues, the hot message rows, and their immutable payloads.

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
CREATE TABLE messages (
    id                   INTEGER PRIMARY KEY,
    queue_id             INTEGER NOT NULL,
    visible_at_ms        INTEGER NOT NULL,
    enqueued_at_ms       INTEGER NOT NULL,  -- retention counts from here
    receive_count        INTEGER NOT NULL DEFAULT 0,
    first_received_at_ms INTEGER NOT NULL DEFAULT 0,  -- 0: never received
    received_at_ms       INTEGER NOT NULL DEFAULT 0,  -- the latest receive, for the 12-hour cap
    receipt_token        INTEGER NOT NULL DEFAULT 0,  -- rotated by every receive
    group_id             TEXT,
    sequence_number      INTEGER
) STRICT;

CREATE INDEX messages_by_visibility ON messages (queue_id, visible_at_ms, id);
CREATE INDEX messages_by_enqueue ON messages (queue_id, enqueued_at_ms);

-- Written once at send, read by id after the claim.
CREATE TABLE message_bodies (
    id                       INTEGER PRIMARY KEY,  -- the messages row
    message_id               TEXT    NOT NULL,
    body                     TEXT    NOT NULL,
    md5_of_body              TEXT    NOT NULL,
    attributes               TEXT,              -- JSON, the wire shape
    trace_header             TEXT,
    sent_at_ms               INTEGER NOT NULL,
    sender_id                TEXT    NOT NULL,
    deduplication_id         TEXT,
    dead_letter_source_arn   TEXT
) STRICT;

CREATE TRIGGER message_bodies_follow_messages AFTER DELETE ON messages
BEGIN
    DELETE FROM message_bodies WHERE id = old.id;
END;
