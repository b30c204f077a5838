-- Workers, periodic schedules and subscriber notifications.

-- name: worker_seen
-- A worker's entry made or refreshed; :busy (a JSON array): the jobs its tasks run now,
-- as of this refresh (null: left as it was).
INSERT INTO {schema}.conveyor_workers
    (name, host, pid, queues, concurrency, version, started_at, last_seen_at, expires_at,
     running
     , busy  -- if :busy
    )
VALUES
    (:name, :host, :pid, :queues::jsonb, :concurrency, :version, now(), now(),
     now() + make_interval(secs => :ttl_s), :running
     , :busy::jsonb  -- if :busy
    )
ON CONFLICT (name) DO UPDATE
SET host = excluded.host, pid = excluded.pid, queues = excluded.queues,
    concurrency = excluded.concurrency, version = excluded.version,
    last_seen_at = now(), expires_at = excluded.expires_at, running = excluded.running
    , busy = excluded.busy  -- if :busy
;

-- name: list_workers
SELECT *, now() AS db_now FROM {schema}.conveyor_workers
WHERE expires_at > now()
ORDER BY name;

-- name: forget_workers
-- The entry of the worker :name (it stopped), or those of workers presumed dead
-- (expired) for longer than :older_than_s.
DELETE FROM {schema}.conveyor_workers
WHERE name = :name  -- if :name
WHERE expires_at <= now() - make_interval(secs => :older_than_s)  -- if :older_than_s
;

-- name: save_schedule
-- A schedule as the app declares it. A new one starts at :first_slot (slots before it
-- are not owed); a known one keeps the slot it reached, and takes :next_slot only if
-- that lies past it (a declaration racing a run must not bring back a taken slot).
INSERT INTO {schema}.conveyor_schedules AS s
    (name, task, queue, spec, last_slot, next_slot, updated_at)
VALUES (:name, :task, :queue, :spec, :first_slot::timestamptz, :next_slot::timestamptz, now())
ON CONFLICT (name) DO UPDATE
SET task = excluded.task, queue = excluded.queue, spec = excluded.spec, updated_at = now(),
    next_slot = CASE
        WHEN excluded.next_slot IS NOT NULL
             AND (s.last_slot IS NULL OR excluded.next_slot > s.last_slot)
        THEN excluded.next_slot ELSE s.next_slot END
RETURNING *, now() AS db_now;

-- name: take_schedule_slot
-- The guard that makes a slot run once: only one caller moves last_slot past it.
UPDATE {schema}.conveyor_schedules
SET last_slot = :slot::timestamptz, next_slot = :next_slot::timestamptz, updated_at = now()
WHERE name = :name AND (last_slot IS NULL OR last_slot < :slot::timestamptz)
RETURNING name;

-- name: list_schedules
SELECT *, now() AS db_now FROM {schema}.conveyor_schedules ORDER BY name;

-- name: take_notifications
-- Subscribers of final jobs not yet told of the job's latest finish (a job retried and
-- finished again is announced again), taken for :lease_s seconds by one dispatcher.
UPDATE {schema}.conveyor_subscribers AS s
SET notifying_until = now() + make_interval(secs => :lease_s)
FROM (SELECT c.job_id, c.subscriber
      FROM {schema}.conveyor_subscribers AS c
      JOIN {schema}.conveyor_jobs AS j ON j.id = c.job_id
      WHERE j.status IN ('completed', 'failed', 'cancelled')
        AND (c.notified_at IS NULL OR c.notified_at < j.finished_at)
        AND (c.notifying_until IS NULL OR c.notifying_until < now())
      ORDER BY c.job_id, c.subscriber
      LIMIT :limit
      FOR UPDATE OF c SKIP LOCKED) AS picked
WHERE s.job_id = picked.job_id AND s.subscriber = picked.subscriber
RETURNING s.job_id, s.subscriber;

-- name: mark_notified
-- :items is a JSON array of {"job_id", "subscriber"}.
UPDATE {schema}.conveyor_subscribers AS s
SET notified_at = now(), notifying_until = NULL, attempts = 0, last_error = NULL
FROM jsonb_to_recordset(:items::jsonb) AS item(job_id bigint, subscriber text)
WHERE s.job_id = item.job_id AND s.subscriber = item.subscriber;

-- name: delivery_attempts
-- How many deliveries to these subscribers failed so far. :items is a JSON array of
-- {"job_id", "subscriber"}.
SELECT s.job_id, s.subscriber, s.attempts
FROM {schema}.conveyor_subscribers AS s
JOIN jsonb_to_recordset(:items::jsonb) AS item(job_id bigint, subscriber text)
  ON s.job_id = item.job_id AND s.subscriber = item.subscriber;

-- name: retry_notifications
-- Deliveries that failed: :items is a JSON array of {"job_id", "subscriber",
-- "attempts", "delay_s", "give_up"}, decided above; offered again after the delay, or
-- counted as told, the error kept. Guarded by the attempts the decision was made on.
UPDATE {schema}.conveyor_subscribers AS s
SET attempts = s.attempts + 1,
    last_error = :error,
    notifying_until = now() + make_interval(secs => item.delay_s),
    notified_at = CASE WHEN item.give_up THEN now() ELSE s.notified_at END
FROM jsonb_to_recordset(:items::jsonb)
     AS item(job_id bigint, subscriber text, attempts integer, delay_s double precision,
             give_up boolean)
WHERE s.job_id = item.job_id AND s.subscriber = item.subscriber
  AND s.attempts = item.attempts;

