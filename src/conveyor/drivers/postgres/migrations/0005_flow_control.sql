-- Per-queue flow control, persisted so every worker on every machine obeys it at once.
-- controlled = true when any of it is set: claims of such a queue take the slower path
-- that locks this row and enforces it; other queues' claims only read this flag.
CREATE TABLE {schema}.conveyor_queues (
    queue             text             PRIMARY KEY,
    paused            boolean          NOT NULL DEFAULT false,
    max_running       integer,
    group_max_running integer,
    rate_limit        integer,
    rate_period       double precision,
    group_rate_limit  integer,
    group_rate_period double precision,
    controlled        boolean          NOT NULL DEFAULT false,
    updated_at        timestamptz      NOT NULL
);

-- Recent starts of rate-limited queues (job_group '' for jobs without a group): a
-- sliding window, so at most N jobs start in any period of the configured length.
CREATE TABLE {schema}.conveyor_starts (
    queue      text        NOT NULL,
    job_group  text        NOT NULL,
    started_at timestamptz NOT NULL
);

CREATE INDEX conveyor_starts_window ON {schema}.conveyor_starts (queue, job_group, started_at);
