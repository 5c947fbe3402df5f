-- Subscriptions take their deliveries when they are read, not at the send: a send to a queue with
-- subscriptions stores the queue's rows and the bodies once plus one line per message in fanout_log,
-- whatever the number of subscriptions; a delivery row per subscription was three index entries in
-- three separate places per subscription, so a send's cost grew with its subscriptions
-- (docs/benchmarks.md, "Subscriptions at scale"). Each subscription takes the lines past its
-- delivered_up_to in one sequential INSERT when it is next received from, browsed, purged or swept.

-- What was sent to a queue that had subscriptions, until every one of them has taken it.
CREATE TABLE fanout_log (
    queue_id       INTEGER NOT NULL,
    id             INTEGER NOT NULL,  -- the message's row in the queue, and its body's id
    visible_at_ms  INTEGER NOT NULL,
    enqueued_at_ms INTEGER NOT NULL,
    group_id       TEXT,
    PRIMARY KEY (queue_id, id)
) STRICT, WITHOUT ROWID;

-- Each subscription (its row in queues) and how far into its queue's fanout_log it has taken.
CREATE TABLE subscriptions (
    id              INTEGER PRIMARY KEY,
    queue_id        INTEGER NOT NULL,
    delivered_up_to INTEGER NOT NULL
) STRICT;
-- The least delivered_up_to of a queue's subscriptions: the log lines before it are no one's any more.
CREATE INDEX subscriptions_by_queue ON subscriptions (queue_id, delivered_up_to);

-- The subscriptions of an older database have every delivery already; the log starts empty.
INSERT INTO subscriptions (id, queue_id, delivered_up_to)
SELECT s.id, q.id, 0 FROM queues s JOIN queues q
    ON q.region = s.region AND q.account = s.account AND q.name = substr(s.name, 1, instr(s.name, '~') - 1)
WHERE instr(s.name, '~') > 0;
