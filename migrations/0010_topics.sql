-- Topics: the SNS API over the same database. A publish stores a message in every subscribed queue
-- that its subscription's filter lets through, in the one transaction that answers it.

-- A topic per (region, account, name). attributes and tags are JSON objects of strings; sequence is
-- the last SequenceNumber a FIFO topic handed out (it only grows).
CREATE TABLE topics (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    region        TEXT NOT NULL,
    account       TEXT NOT NULL,
    name          TEXT NOT NULL,
    fifo          INTEGER NOT NULL,
    attributes    TEXT NOT NULL,
    tags          TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    sequence      INTEGER NOT NULL DEFAULT 0,
    UNIQUE (region, account, name)
) STRICT;

-- A topic's subscriptions (protocol sqs: the endpoint is a queue ARN). attributes: the settable ones
-- (RawMessageDelivery, FilterPolicy, FilterPolicyScope, RedrivePolicy, DeliveryPolicy) as JSON.
CREATE TABLE topic_subscriptions (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    topic_id      INTEGER NOT NULL,
    arn           TEXT NOT NULL UNIQUE,
    protocol      TEXT NOT NULL,
    endpoint      TEXT NOT NULL,
    owner         TEXT NOT NULL,
    principal     TEXT NOT NULL,
    attributes    TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL
) STRICT;
CREATE INDEX topic_subscriptions_by_topic ON topic_subscriptions (topic_id, id);

-- A FIFO topic's deduplication ids within their five minutes: a repeat is answered, not delivered.
CREATE TABLE topic_deduplication (
    topic_id         INTEGER NOT NULL,
    deduplication_id TEXT NOT NULL,
    expires_at_ms    INTEGER NOT NULL,
    message_id       TEXT NOT NULL,
    sequence_number  TEXT NOT NULL,
    PRIMARY KEY (topic_id, deduplication_id)
) STRICT, WITHOUT ROWID;

-- The key and self-signed certificate that sign notification envelopes (PEM), made once per database
-- so that a consumer that validated one envelope validates the next after a restart.
CREATE TABLE topic_signing (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    key_pem     TEXT NOT NULL,
    cert_pem    TEXT NOT NULL
) STRICT;
