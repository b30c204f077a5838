-- Workers announce themselves here, refresh the row with their heartbeats and delete it
-- on a clean stop; a row whose expires_at passed belongs to a worker presumed dead.
CREATE TABLE conveyor_workers (
    name         VARCHAR(500) NOT NULL PRIMARY KEY,
    host         TEXT         NOT NULL,
    pid          INT          NOT NULL,
    queues       LONGTEXT     NOT NULL CHECK (JSON_VALID(queues)),
    concurrency  INT          NOT NULL,
    version      VARCHAR(100) NOT NULL,
    started_at   DATETIME(6)  NOT NULL,
    last_seen_at DATETIME(6)  NOT NULL,
    expires_at   DATETIME(6)  NOT NULL,
    running      INT          NOT NULL DEFAULT 0
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = {collation};

-- Periodic jobs: the last slot enqueued per schedule. A slot is enqueued by the worker
-- whose guarded update moves last_slot past it.
CREATE TABLE conveyor_schedules (
    name       VARCHAR(500) NOT NULL PRIMARY KEY,
    task       VARCHAR(200) NOT NULL,
    queue      VARCHAR(200) NOT NULL,
    spec       TEXT         NOT NULL,
    last_slot  DATETIME(6),
    next_slot  DATETIME(6),
    updated_at DATETIME(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = {collation};
