-- Retention policies: how long final jobs are kept, per final status, for one queue
-- and/or one task or for all ('' stands for "any"). keep_seconds NULL keeps them for
-- ever. archive: where pruned jobs' records go first ("task:NAME" or "file:PATH").
-- retire_keys: the keys of the jobs pruned under the policy stay taken
-- (conveyor_retired_keys). (Migration 0014 of the SQLite and PostgreSQL schemas.)
CREATE TABLE conveyor_retention (
    queue        VARCHAR(200) NOT NULL DEFAULT '',
    task         VARCHAR(200) NOT NULL DEFAULT '',
    status       VARCHAR(16)  NOT NULL CHECK (status IN ('completed', 'failed', 'cancelled')),
    keep_seconds DOUBLE,
    archive      TEXT,
    retire_keys  BOOLEAN      NOT NULL DEFAULT FALSE,
    updated_at   DATETIME(6)  NOT NULL,
    PRIMARY KEY (queue, task, status)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = {collation};

-- The keys of pruned jobs whose policy retired them: what the job was when it went,
-- so a later enqueue with the key is answered as if the job were still there. A key
-- is longer than an index entry may be: it is unique by its SHA-256.
CREATE TABLE conveyor_retired_keys (
    id           BIGINT        NOT NULL AUTO_INCREMENT PRIMARY KEY,
    queue        VARCHAR(200)  NOT NULL,
    `key`        VARCHAR(1000) NOT NULL,
    key_hash     BINARY(32)    AS (UNHEX(SHA2(`key`, 256))) STORED,
    job_id       BIGINT        NOT NULL,
    task         VARCHAR(200)  NOT NULL,
    status       VARCHAR(16)   NOT NULL,
    attempts     INT           NOT NULL,
    max_attempts INT           NOT NULL,
    created_at   DATETIME(6)   NOT NULL,
    finished_at  DATETIME(6),
    retired_at   DATETIME(6)   NOT NULL,
    UNIQUE INDEX conveyor_retired_keys_key (queue, key_hash)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = {collation};
