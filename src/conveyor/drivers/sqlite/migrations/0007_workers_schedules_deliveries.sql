-- Workers announce themselves here, refresh the row with their heartbeats and delete it
-- on a clean stop; a row whose expires_at passed belongs to a worker presumed dead.
CREATE TABLE conveyor_workers (
    name         TEXT    PRIMARY KEY,
    host         TEXT    NOT NULL,
    pid          INTEGER NOT NULL,
    queues       TEXT    NOT NULL,                         -- JSON array
    concurrency  INTEGER NOT NULL,
    version      TEXT    NOT NULL,
    started_at   REAL    NOT NULL,
    last_seen_at REAL    NOT NULL,
    expires_at   REAL    NOT NULL,
    running      INTEGER NOT NULL DEFAULT 0
);

-- Periodic jobs: the last slot enqueued per schedule. A slot is enqueued by the worker
-- whose guarded update moves last_slot past it, so each slot runs once however many
-- workers watch the schedule.
CREATE TABLE conveyor_schedules (
    name       TEXT PRIMARY KEY,
    task       TEXT NOT NULL,
    queue      TEXT NOT NULL,
    spec       TEXT NOT NULL,
    last_slot  REAL,
    next_slot  REAL,
    updated_at REAL NOT NULL
);

-- Failed deliveries to a subscriber are retried with back-off.
ALTER TABLE conveyor_subscribers ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conveyor_subscribers ADD COLUMN last_error TEXT;
