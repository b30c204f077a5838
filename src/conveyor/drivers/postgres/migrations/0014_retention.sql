-- Retention policies: how long final jobs are kept, per final status, for one queue
-- and/or one task or for all ('' stands for "any"). keep_seconds NULL keeps them for
-- ever. archive: where pruned jobs' records go first ("task:NAME" or "file:PATH").
-- retire_keys: the keys of the jobs pruned under the policy stay taken
-- (conveyor_retired_keys).
CREATE TABLE {schema}.conveyor_retention (
    queue        text             NOT NULL DEFAULT '',
    task         text             NOT NULL DEFAULT '',
    status       text             NOT NULL CHECK (status IN ('completed', 'failed', 'cancelled')),
    keep_seconds double precision,
    archive      text,
    retire_keys  boolean          NOT NULL DEFAULT false,
    updated_at   timestamptz      NOT NULL,
    PRIMARY KEY (queue, task, status)
);

-- The keys of pruned jobs whose policy retired them: what the job was when it went,
-- so a later enqueue with the key is answered as if the job were still there.
CREATE TABLE {schema}.conveyor_retired_keys (
    queue        text        NOT NULL,
    key          text        NOT NULL,
    job_id       bigint      NOT NULL,
    task         text        NOT NULL,
    status       text        NOT NULL,
    attempts     integer     NOT NULL,
    max_attempts integer     NOT NULL,
    created_at   timestamptz NOT NULL,
    finished_at  timestamptz,
    retired_at   timestamptz NOT NULL,
    PRIMARY KEY (queue, key)
);
