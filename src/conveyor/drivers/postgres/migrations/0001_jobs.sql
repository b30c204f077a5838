-- The jobs table. {schema} is the schema chosen in the URL (default: public).
CREATE TABLE {schema}.conveyor_jobs (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue               text        NOT NULL,
    task                text        NOT NULL,
    payload             jsonb,
    key                 text,
    status              text        NOT NULL DEFAULT 'pending'
                        CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled')),
    priority            integer     NOT NULL DEFAULT 0,
    run_at              timestamptz NOT NULL,
    attempts            integer     NOT NULL DEFAULT 0,
    max_attempts        integer     NOT NULL,
    claim_id            text,
    claimed_at          timestamptz,
    lease_seconds       double precision,
    lease_expires_at    timestamptz,
    heartbeat_at        timestamptz,
    worker              text,
    progress_total      integer,
    progress_completed  integer,
    progress_failed     integer,
    progress_current    jsonb,
    progress_checkpoint jsonb,
    progress_detail     jsonb,
    result              jsonb,
    error               text,
    error_kind          text CHECK (error_kind IN ('retryable', 'terminal')),
    created_at          timestamptz NOT NULL,
    started_at          timestamptz,
    finished_at         timestamptz,
    updated_at          timestamptz NOT NULL
);

-- At most one active job per (queue, key): the database enforces dedupe, not the caller.
CREATE UNIQUE INDEX conveyor_jobs_active_key
    ON {schema}.conveyor_jobs (queue, key)
    WHERE key IS NOT NULL AND status IN ('pending', 'running');

-- What claim scans: the pending jobs of a queue, by priority then FIFO.
CREATE INDEX conveyor_jobs_claimable
    ON {schema}.conveyor_jobs (queue, priority, id)
    WHERE status = 'pending';

CREATE INDEX conveyor_jobs_running_lease
    ON {schema}.conveyor_jobs (lease_expires_at)
    WHERE status = 'running';

CREATE INDEX conveyor_jobs_claim ON {schema}.conveyor_jobs (claim_id) WHERE claim_id IS NOT NULL;

CREATE INDEX conveyor_jobs_key ON {schema}.conveyor_jobs (queue, key, id) WHERE key IS NOT NULL;

CREATE INDEX conveyor_jobs_status ON {schema}.conveyor_jobs (status, queue, id);
