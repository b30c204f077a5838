-- Workers, periodic schedules and subscriber notifications.

-- name: worker_seen
-- A worker's entry made or refreshed; :busy (a JSON array): the jobs its tasks run now,
-- as of this refresh (null: left as it was).
INSERT INTO conveyor_workers
    (name, host, pid, queues, concurrency, version, started_at, last_seen_at, expires_at,
     running
     , busy  -- if :busy
    )
VALUES
    (:name, :host, :pid, :queues, :concurrency, :version, {now}, {now}, {now} + :ttl_s,
     :running
     , :busy  -- if :busy
    )
ON CONFLICT (name) DO UPDATE
SET host = excluded.host, pid = excluded.pid, queues = excluded.queues,
    concurrency = excluded.concurrency, version = excluded.version,
    last_seen_at = {now}, expires_at = {now} + :ttl_s, running = excluded.running
    , busy = excluded.busy  -- if :busy
;

-- name: list_workers
SELECT *, {now} AS db_now FROM conveyor_workers WHERE expires_at > {now} ORDER BY name;

-- name: forget_workers
-- The entry of the worker :name (it stopped), or those of workers presumed dead
-- (expired) for longer than :older_than_s.
DELETE FROM conveyor_workers
WHERE name = :name  -- if :name
WHERE expires_at <= {now} - :older_than_s  -- if :older_than_s
;

-- name: save_schedule
-- A schedule as the app declares it. A new one starts at :first_slot (slots before it
-- are not owed); a known one keeps the slot it reached, and takes :next_slot only if
-- that lies past it (a declaration racing a run must not bring back a taken slot).
INSERT INTO conveyor_schedules (name, task, queue, spec, last_slot, next_slot, updated_at)
VALUES (:name, :task, :queue, :spec, :first_slot, :next_slot, {now})
ON CONFLICT (name) DO UPDATE
SET task = excluded.task, queue = excluded.queue, spec = excluded.spec, updated_at = {now},
    next_slot = CASE
        WHEN excluded.next_slot IS NOT NULL
             AND (conveyor_schedules.last_slot IS NULL
                  OR excluded.next_slot > conveyor_schedules.last_slot)
        THEN excluded.next_slot ELSE conveyor_schedules.next_slot END
RETURNING *, {now} AS db_now;

-- name: take_schedule_slot
-- The guard that makes a slot run once: only one caller moves last_slot past it.
UPDATE conveyor_schedules
SET last_slot = :slot, next_slot = :next_slot, updated_at = {now}
WHERE name = :name AND (last_slot IS NULL OR last_slot < :slot)
RETURNING name;

-- name: list_schedules
SELECT *, {now} AS db_now FROM conveyor_schedules ORDER BY name;

-- name: take_notifications
-- Subscribers of final jobs not yet told of the job's latest finish (a job retried and
-- finished again is announced again), taken for :lease_s seconds by one dispatcher.
UPDATE conveyor_subscribers
SET notifying_until = {now} + :lease_s
WHERE (job_id, subscriber) IN (
    SELECT s.job_id, s.subscriber
    FROM conveyor_subscribers AS s
    JOIN conveyor_jobs AS j ON j.id = s.job_id
    WHERE j.status IN ('completed', 'failed', 'cancelled')
      AND (s.notified_at IS NULL OR s.notified_at < j.finished_at)
      AND (s.notifying_until IS NULL OR s.notifying_until < {now})
    ORDER BY s.job_id, s.subscriber
    LIMIT :limit)
RETURNING job_id, subscriber;

-- name: mark_notified
-- :items is a JSON array of {"job_id", "subscriber"}.
UPDATE conveyor_subscribers
SET notified_at = {now}, notifying_until = NULL, attempts = 0, last_error = NULL
WHERE EXISTS (SELECT 1 FROM json_each(:items)
              WHERE value ->> '$.job_id' = conveyor_subscribers.job_id
                AND value ->> '$.subscriber' = conveyor_subscribers.subscriber);

-- name: delivery_attempts
-- How many deliveries to these subscribers failed so far. :items is a JSON array of
-- {"job_id", "subscriber"}.
SELECT s.job_id, s.subscriber, s.attempts
FROM conveyor_subscribers AS s
JOIN json_each(:items) AS item
  ON s.job_id = item.value ->> '$.job_id' AND s.subscriber = item.value ->> '$.subscriber';

-- name: retry_notifications
-- Deliveries that failed: :items is a JSON array of {"job_id", "subscriber",
-- "attempts", "delay_s", "give_up"}, decided above; offered again after the delay, or
-- counted as told, the error kept. Guarded by the attempts the decision was made on.
UPDATE conveyor_subscribers
SET attempts = conveyor_subscribers.attempts + 1,
    last_error = :error,
    notifying_until = {now} + item.delay_s,
    notified_at = CASE WHEN item.give_up THEN {now} ELSE conveyor_subscribers.notified_at END
FROM (SELECT value ->> '$.job_id' AS job_id,
             value ->> '$.subscriber' AS subscriber,
             value ->> '$.attempts' AS attempts,
             value ->> '$.delay_s' AS delay_s,
             value ->> '$.give_up' AS give_up
      FROM json_each(:items)) AS item
WHERE conveyor_subscribers.job_id = item.job_id
  AND conveyor_subscribers.subscriber = item.subscriber
  AND conveyor_subscribers.attempts = item.attempts;

