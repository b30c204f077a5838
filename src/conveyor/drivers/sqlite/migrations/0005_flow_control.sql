-- Per-queue flow control, persisted so every worker on every machine obeys it at once.
-- controlled = 1 when any of it is set: claims of such a queue take the slower path
-- that enforces it; other queues' claims never look further than this flag.
CREATE TABLE conveyor_queues (
    queue             TEXT    PRIMARY KEY,
    paused            INTEGER NOT NULL DEFAULT 0,
    max_running       INTEGER,
    group_max_running INTEGER,
    rate_limit        INTEGER,
    rate_period       REAL,
    group_rate_limit  INTEGER,
    group_rate_period REAL,
    controlled        INTEGER NOT NULL DEFAULT 0,
    updated_at        REAL    NOT NULL
);

-- Recent starts of rate-limited queues (job_group '' for jobs without a group): a
-- sliding window, so at most N jobs start in any period of the configured length.
CREATE TABLE conveyor_starts (
    queue      TEXT NOT NULL,
    job_group  TEXT NOT NULL,
    started_at REAL NOT NULL
);

CREATE INDEX conveyor_starts_window ON conveyor_starts (queue, job_group, started_at);
