-- The manual clock of a server started with --test-clock: its reading, written at its first
-- start and before every move, so that a restart or a crash resumes at exactly the time it
-- stood. One row at most, and none while the server runs on the real clock.
CREATE TABLE test_clock (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    now_ms INTEGER NOT NULL
) STRICT;
