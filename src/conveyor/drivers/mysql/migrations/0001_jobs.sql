-- The jobs and what hangs off them. Text that is compared or indexed uses a binary,
-- no-pad collation ({collation}), so 'A' <> 'a' and 'a' <> 'a ' as on the other databases.
-- Times are UTC, to the microsecond; JSON is kept as the text conveyor wrote (lossless),
-- checked with JSON_VALID.
CREATE TABLE conveyor_jobs (
    id                  BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    queue               VARCHAR(200) NOT NULL,
    task                VARCHAR(200) NOT NULL,
    payload             LONGTEXT     CHECK (JSON_VALID(payload)),
    `key`               VARCHAR(1000),
    status              VARCHAR(16)  NOT NULL DEFAULT 'pending'
                        CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled')),
    priority            INT          NOT NULL DEFAULT 0,
    run_at              DATETIME(6)  NOT NULL,
    attempts            INT          NOT NULL DEFAULT 0,
    max_attempts        INT          NOT NULL,
    claim_id            VARCHAR(255),
    claimed_at          DATETIME(6),
    lease_seconds       DOUBLE,
    lease_expires_at    DATETIME(6),
    heartbeat_at        DATETIME(6),
    worker              TEXT,
    progress_total      INT,
    progress_completed  INT,
    progress_failed     INT,
    progress_current    LONGTEXT     CHECK (JSON_VALID(progress_current)),
    progress_checkpoint LONGTEXT     CHECK (JSON_VALID(progress_checkpoint)),
    progress_detail     LONGTEXT     CHECK (JSON_VALID(progress_detail)),
    result              LONGTEXT     CHECK (JSON_VALID(result)),
    error               LONGTEXT,
    error_kind          VARCHAR(16)  CHECK (error_kind IN ('retryable', 'terminal')),
    created_at          DATETIME(6)  NOT NULL,
    started_at          DATETIME(6),
    finished_at         DATETIME(6),
    updated_at          DATETIME(6)  NOT NULL,
    -- Every failed attempt's error (the latest 20): a JSON array of
    -- {"attempt", "error", "kind", "at", "worker"}.
    errors              LONGTEXT     CHECK (JSON_VALID(errors)),
    -- A concurrency group ("book-42"): a queue may cap how many of a group run at once.
    job_group           VARCHAR(200),
    -- Dependencies: the ids this job runs after (for reading), how many of them are not
    -- yet satisfied (a job is claimable only at 0), and whether other jobs wait on it.
    depends_on          LONGTEXT     CHECK (JSON_VALID(depends_on)),
    waiting_for         INT          NOT NULL DEFAULT 0,
    has_dependents      BOOLEAN      NOT NULL DEFAULT FALSE,
    -- At most one active job per (queue, key). MySQL has no partial index: this column
    -- is the key's SHA-256 while the job is pending or running, NULL otherwise, and
    -- NULLs never collide in the unique index below. (A hash, because a 1000-character
    -- key is longer than an index entry may be.)
    active_key          BINARY(32) AS (
                            CASE WHEN status IN ('pending', 'running') AND `key` IS NOT NULL
                                 THEN UNHEX(SHA2(`key`, 256)) END) STORED,
    UNIQUE INDEX conveyor_jobs_active_key (queue, active_key),
    -- What claims scan: a queue's pending jobs with their dependencies met, by priority
    -- then FIFO.
    INDEX conveyor_jobs_claimable (queue, status, waiting_for, priority, id),
    -- Pending jobs by due time (deferred and waiting ones are counted from it); running
    -- ones by lease.
    INDEX conveyor_jobs_due (queue, status, run_at),
    INDEX conveyor_jobs_running_lease (status, lease_expires_at),
    INDEX conveyor_jobs_running_group (queue, status, job_group),
    INDEX conveyor_jobs_claim (claim_id),
    INDEX conveyor_jobs_key (queue, `key`(255), id),
    INDEX conveyor_jobs_status (status, queue, id),
    INDEX conveyor_jobs_finished (finished_at),
    INDEX conveyor_jobs_task (task, id),
    INDEX conveyor_jobs_created (created_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = {collation};

-- Who wants to hear when a job reaches a final state. A dispatcher takes a subscriber's
-- notification for a while (notifying_until) before telling it; failed deliveries are
-- retried with back-off.
CREATE TABLE conveyor_subscribers (
    job_id          BIGINT       NOT NULL,
    subscriber      VARCHAR(700) NOT NULL,
    created_at      DATETIME(6)  NOT NULL,
    notified_at     DATETIME(6),
    notifying_until DATETIME(6),
    attempts        INT          NOT NULL DEFAULT 0,
    last_error      LONGTEXT,
    PRIMARY KEY (job_id, subscriber),
    CONSTRAINT conveyor_subscribers_job FOREIGN KEY (job_id)
        REFERENCES conveyor_jobs (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = {collation};

-- run_on_failure true: the job runs once the dependency is final, whatever its end;
-- false: only once it completed (its failure or cancellation cancels the job). MySQL's
-- triggers may not change the table that fired them, so the backend settles dependents
-- itself in every statement that moves a job with dependents (see handlers.py).
CREATE TABLE conveyor_dependencies (
    job_id         BIGINT  NOT NULL,
    depends_on     BIGINT  NOT NULL,
    run_on_failure BOOLEAN NOT NULL DEFAULT FALSE,
    PRIMARY KEY (job_id, depends_on),
    INDEX conveyor_dependencies_of (depends_on),
    CONSTRAINT conveyor_dependencies_job FOREIGN KEY (job_id)
        REFERENCES conveyor_jobs (id) ON DELETE CASCADE,
    CONSTRAINT conveyor_dependencies_on FOREIGN KEY (depends_on)
        REFERENCES conveyor_jobs (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = {collation};

-- Per-queue flow control. controlled = true when any of it is set: claims of such a
-- queue lock this row and enforce it; other queues' claims only read the flag.
CREATE TABLE conveyor_queues (
    queue             VARCHAR(200) NOT NULL PRIMARY KEY,
    paused            BOOLEAN      NOT NULL DEFAULT FALSE,
    max_running       INT,
    group_max_running INT,
    rate_limit        INT,
    rate_period       DOUBLE,
    group_rate_limit  INT,
    group_rate_period DOUBLE,
    controlled        BOOLEAN      NOT NULL DEFAULT FALSE,
    updated_at        DATETIME(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = {collation};

-- Recent starts of rate-limited queues (job_group '' for jobs without a group).
CREATE TABLE conveyor_starts (
    id         BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    queue      VARCHAR(200) NOT NULL,
    job_group  VARCHAR(200) NOT NULL,
    started_at DATETIME(6)  NOT NULL,
    INDEX conveyor_starts_window (queue, job_group, started_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = {collation};
