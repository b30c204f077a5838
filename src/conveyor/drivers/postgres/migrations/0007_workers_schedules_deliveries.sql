-- Workers announce themselves here, refresh the row with their heartbeats and delete it
-- on a clean stop; a row whose expires_at passed belongs to a worker presumed dead.
CREATE TABLE {schema}.conveyor_workers (
    name         text        PRIMARY KEY,
    host         text        NOT NULL,
    pid          integer     NOT NULL,
    queues       jsonb       NOT NULL,
    concurrency  integer     NOT NULL,
    version      text        NOT NULL,
    started_at   timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    running      integer     NOT NULL DEFAULT 0
);

-- Periodic jobs: the last slot enqueued per schedule. A slot is enqueued by the worker
-- whose guarded update moves last_slot past it, so each slot runs once however many
-- workers watch the schedule.
CREATE TABLE {schema}.conveyor_schedules (
    name       text        PRIMARY KEY,
    task       text        NOT NULL,
    queue      text        NOT NULL,
    spec       text        NOT NULL,
    last_slot  timestamptz,
    next_slot  timestamptz,
    updated_at timestamptz NOT NULL
);

-- Failed deliveries to a subscriber are retried with back-off.
ALTER TABLE {schema}.conveyor_subscribers ADD COLUMN attempts integer NOT NULL DEFAULT 0;
ALTER TABLE {schema}.conveyor_subscribers ADD COLUMN last_error text;
