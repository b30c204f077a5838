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
    (:name, :host, :pid, :queues, :concurrency, :version, {now}, {now},
     {now} + INTERVAL :ttl_s SECOND, :running
     , :busy  -- if :busy
    )
ON DUPLICATE KEY UPDATE
    host = VALUES(host), pid = VALUES(pid), queues = VALUES(queues),
    concurrency = VALUES(concurrency), version = VALUES(version),
    last_seen_at = {now}, expires_at = VALUES(expires_at), running = VALUES(running)
    , busy = VALUES(busy)  -- if :busy
;

-- name: list_workers
SELECT *, {now} AS db_now FROM conveyor_workers
WHERE expires_at > {now}
ORDER BY name;

-- name: forget_workers
-- The entry of the worker :name (it stopped), or those of workers presumed dead
-- (expired) for longer than :older_than_s.
DELETE FROM conveyor_workers
WHERE name = :name  -- if :name
WHERE expires_at <= {now} - INTERVAL :older_than_s SECOND  -- if :older_than_s
;

-- name: save_schedule_upsert
-- A schedule as the app declares it. A new one starts at :first_slot (slots before it
-- are not owed); a known one keeps the slot it reached, and takes :next_slot only if
-- that lies past it (a declaration racing a run must not bring back a taken slot).
INSERT INTO conveyor_schedules (name, task, queue, spec, last_slot, next_slot, updated_at)
VALUES (:name, :task, :queue, :spec, :first_slot, :next_slot, {now})
ON DUPLICATE KEY UPDATE
    task = VALUES(task), queue = VALUES(queue), spec = VALUES(spec), updated_at = {now},
    next_slot = CASE
        WHEN VALUES(next_slot) IS NOT NULL
             AND (last_slot IS NULL OR VALUES(next_slot) > last_slot)
        THEN VALUES(next_slot) ELSE next_slot END;

-- name: schedule_by_name
SELECT *, {now} AS db_now FROM conveyor_schedules WHERE name = :name;

-- name: take_schedule_slot_update
-- The guard that makes a slot run once: only one caller moves last_slot past it.
UPDATE conveyor_schedules
SET last_slot = :slot, next_slot = :next_slot, updated_at = {now}
WHERE name = :name AND (last_slot IS NULL OR last_slot < :slot);

-- name: list_schedules
SELECT *, {now} AS db_now FROM conveyor_schedules ORDER BY name;

-- name: take_notifications_lock
-- Subscribers of final jobs not yet told of the job's latest finish (a job retried and
-- finished again is announced again), taken for :lease_s seconds by one dispatcher.
-- The jobs are read in a subquery, so only the subscriber rows are locked.
SELECT c.job_id, c.subscriber FROM conveyor_subscribers AS c
WHERE (c.notifying_until IS NULL OR c.notifying_until < {now})
  AND EXISTS (SELECT 1 FROM conveyor_jobs AS j
              WHERE j.id = c.job_id AND j.status IN ('completed', 'failed', 'cancelled')
                AND (c.notified_at IS NULL OR c.notified_at < j.finished_at))
ORDER BY c.job_id, c.subscriber
LIMIT :limit
FOR UPDATE SKIP LOCKED;

-- name: take_notifications_update
UPDATE conveyor_subscribers
SET notifying_until = {now} + INTERVAL :lease_s SECOND
WHERE (job_id, subscriber) IN :locked;

-- name: mark_notified
-- :items is a JSON array of {"job_id", "subscriber"}.
UPDATE conveyor_subscribers
SET notified_at = {now}, notifying_until = NULL, attempts = 0, last_error = NULL
WHERE (job_id, subscriber) IN (
    SELECT job_id, subscriber FROM JSON_TABLE(:items, '$[*]' COLUMNS (
        job_id BIGINT PATH '$.job_id', subscriber {text} PATH '$.subscriber')) AS t);

-- name: delivery_attempts
-- How many deliveries to these subscribers failed so far. :items is a JSON array of
-- {"job_id", "subscriber"}.
SELECT s.job_id, s.subscriber, s.attempts
FROM conveyor_subscribers AS s
WHERE (s.job_id, s.subscriber) IN (
    SELECT job_id, subscriber FROM JSON_TABLE(:items, '$[*]' COLUMNS (
        job_id BIGINT PATH '$.job_id', subscriber {text} PATH '$.subscriber')) AS t);

-- name: retry_notifications
-- Deliveries that failed: :items is a JSON array of {"job_id", "subscriber",
-- "attempts", "delay_s", "give_up"}, decided above; offered again after the delay, or
-- counted as told, the error kept. Guarded by the attempts the decision was made on.
-- No assignment reads a column another one sets.
UPDATE conveyor_subscribers AS s
JOIN JSON_TABLE(:items, '$[*]' COLUMNS (
         job_id BIGINT PATH '$.job_id', subscriber {text} PATH '$.subscriber',
         attempts INT PATH '$.attempts', delay_s DOUBLE PATH '$.delay_s',
         give_up BOOLEAN PATH '$.give_up')) AS item
  ON s.job_id = item.job_id AND s.subscriber = item.subscriber AND s.attempts = item.attempts
SET s.last_error = :error,
    s.notifying_until = {now} + INTERVAL item.delay_s SECOND,
    s.notified_at = CASE WHEN item.give_up THEN {now} ELSE s.notified_at END,
    s.attempts = item.attempts + 1;
