-- The jobs table. Times are seconds since the Unix epoch (REAL, millisecond precision),
-- always written from the database clock.
CREATE TABLE conveyor_jobs (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused, even after prune
    queue               TEXT    NOT NULL,
    task                TEXT    NOT NULL,
    payload             TEXT,                               -- JSON
    key                 TEXT,
    status              TEXT    NOT NULL DEFAULT 'pending'
                        CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled')),
    priority            INTEGER NOT NULL DEFAULT 0,
    run_at              REAL    NOT NULL,
    attempts            INTEGER NOT NULL DEFAULT 0,
    max_attempts        INTEGER NOT NULL,
    claim_id            TEXT,
    claimed_at          REAL,
    lease_seconds       REAL,
    lease_expires_at    REAL,
    heartbeat_at        REAL,
    worker              TEXT,
    progress_total      INTEGER,
    progress_completed  INTEGER,
    progress_failed     INTEGER,
    progress_current    TEXT,                               -- JSON
    progress_checkpoint TEXT,                               -- JSON
    progress_detail     TEXT,                               -- JSON
    result              TEXT,                               -- JSON
    error               TEXT,
    error_kind          TEXT CHECK (error_kind IN ('retryable', 'terminal')),
    created_at          REAL    NOT NULL,
    started_at          REAL,
    finished_at         REAL,
    updated_at          REAL    NOT NULL
);

-- At most one active job per (queue, key): the database enforces dedupe, not the caller.
CREATE UNIQUE INDEX conveyor_jobs_active_key
    ON conveyor_jobs (queue, key)
    WHERE key IS NOT NULL AND status IN ('pending', 'running');

-- What claim scans: the pending jobs of a queue, by priority then FIFO.
CREATE INDEX conveyor_jobs_claimable
    ON conveyor_jobs (queue, priority, id)
    WHERE status = 'pending';

CREATE INDEX conveyor_jobs_running_lease
    ON conveyor_jobs (lease_expires_at)
    WHERE status = 'running';

CREATE INDEX conveyor_jobs_claim ON conveyor_jobs (claim_id) WHERE claim_id IS NOT NULL;

CREATE INDEX conveyor_jobs_key ON conveyor_jobs (queue, key, id) WHERE key IS NOT NULL;

CREATE INDEX conveyor_jobs_status ON conveyor_jobs (status, queue, id);
