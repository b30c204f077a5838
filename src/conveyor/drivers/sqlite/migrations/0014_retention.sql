-- Retention policies: how long final jobs are kept, per final status, for one queue
-- and/or one task or for all ('' stands for "any"). keep_seconds NULL keeps them for
-- ever. archive: where pruned jobs' records go first ("task:NAME" or "file:PATH").
-- retire_keys: the keys of the jobs pruned under the policy stay taken
-- (conveyor_retired_keys).
CREATE TABLE conveyor_retention (
    queue        TEXT    NOT NULL DEFAULT '',
    task         TEXT    NOT NULL DEFAULT '',
    status       TEXT    NOT NULL CHECK (status IN ('completed', 'failed', 'cancelled')),
    keep_seconds REAL,
    archive      TEXT,
    retire_keys  INTEGER NOT NULL DEFAULT 0,
    updated_at   REAL    NOT NULL,
    PRIMARY KEY (queue, task, status)
) WITHOUT ROWID;

-- The keys of pruned jobs whose policy retired them: what the job was when it went,
-- so a later enqueue with the key is answered as if the job were still there.
CREATE TABLE conveyor_retired_keys (
    queue        TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    job_id       INTEGER NOT NULL,
    task         TEXT    NOT NULL,
    status       TEXT    NOT NULL,
    attempts     INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL,
    created_at   REAL    NOT NULL,
    finished_at  REAL,
    retired_at   REAL    NOT NULL,
    PRIMARY KEY (queue, key)
) WITHOUT ROWID;
