-- Named statements of the SQLite backend. The PostgreSQL backend has the same names with
-- the same parameters. {now} stands for the database clock in epoch seconds. Every
-- state change is a single statement guarded by the state it expects.

-- name: insert_job
INSERT INTO conveyor_jobs
    (queue, task, payload, key, priority, run_at, max_attempts, created_at, updated_at)
VALUES
    (:queue, :task, :payload, :key, :priority, coalesce(:run_at, {now}), :max_attempts,
     {now}, {now})
ON CONFLICT (queue, key) WHERE key IS NOT NULL AND status IN ('pending', 'running')
DO NOTHING
RETURNING *;

-- name: insert_jobs
-- Many jobs without keys in one statement; :items is a JSON array of objects.
INSERT INTO conveyor_jobs
    (queue, task, payload, key, priority, run_at, max_attempts, created_at, updated_at)
SELECT value ->> '$.queue', value ->> '$.task', value ->> '$.payload', NULL,
       value ->> '$.priority', coalesce(value ->> '$.run_at', {now}),
       value ->> '$.max_attempts', {now}, {now}
FROM json_each(:items)
ORDER BY json_each.key
RETURNING *;

-- name: active_by_key
SELECT * FROM conveyor_jobs
WHERE queue = :queue AND key = :key AND status IN ('pending', 'running');

-- name: latest_by_key
SELECT *, {now} AS db_now FROM conveyor_jobs
WHERE queue = :queue AND key = :key
ORDER BY id DESC
LIMIT 1;

-- name: add_subscriber
INSERT INTO conveyor_subscribers (job_id, subscriber, created_at)
VALUES (:job_id, :subscriber, {now})
ON CONFLICT DO NOTHING;

-- name: subscribers
SELECT subscriber FROM conveyor_subscribers
WHERE job_id = :job_id
ORDER BY created_at, subscriber;

-- name: claim_jobs
UPDATE conveyor_jobs
SET status = 'running',
    attempts = attempts + 1,
    claim_id = :claim_id,
    worker = :worker,
    claimed_at = {now},
    heartbeat_at = {now},
    started_at = {now},
    lease_seconds = :lease_s,
    lease_expires_at = {now} + :lease_s,
    updated_at = {now}
WHERE id IN (
    SELECT id FROM conveyor_jobs
    WHERE queue = :queue AND status = 'pending' AND run_at <= {now}
    ORDER BY priority, id
    LIMIT :limit)
RETURNING *;

-- name: count_claimable
SELECT count(*) AS n FROM conveyor_jobs
WHERE queue = :queue AND status = 'pending' AND run_at <= {now};

-- name: complete_jobs
-- :items is a JSON array of {"id", "claim_id", "result" (JSON text or null)}.
-- The unary + on status keeps the planner from driving the update through the status
-- index (every running job, each probing the whole batch): it walks the batch instead
-- and finds each job by id. The same in fail_jobs and heartbeat_jobs.
UPDATE conveyor_jobs
SET status = 'completed',
    result = item.result,
    finished_at = {now},
    lease_expires_at = NULL,
    updated_at = {now}
FROM (SELECT value ->> '$.id' AS id,
             value ->> '$.claim_id' AS claim_id,
             value ->> '$.result' AS result
      FROM json_each(:items)) AS item
WHERE conveyor_jobs.id = item.id
  AND conveyor_jobs.claim_id = item.claim_id
  AND +conveyor_jobs.status = 'running'
RETURNING *;

-- name: fail_jobs
-- :items is a JSON array of {"id", "claim_id", "error", "error_kind", "retry", "delay_s"}.
-- A retryable failure with attempts left goes back to pending after the delay.
UPDATE conveyor_jobs
SET status = CASE WHEN item.again THEN 'pending' ELSE 'failed' END,
    run_at = CASE WHEN item.again THEN {now} + item.delay_s ELSE conveyor_jobs.run_at END,
    finished_at = CASE WHEN item.again THEN NULL ELSE {now} END,
    claim_id = CASE WHEN item.again THEN NULL ELSE conveyor_jobs.claim_id END,
    claimed_at = CASE WHEN item.again THEN NULL ELSE conveyor_jobs.claimed_at END,
    worker = CASE WHEN item.again THEN NULL ELSE conveyor_jobs.worker END,
    heartbeat_at = CASE WHEN item.again THEN NULL ELSE conveyor_jobs.heartbeat_at END,
    lease_expires_at = NULL,
    error = item.error,
    error_kind = item.error_kind,
    updated_at = {now}
FROM (SELECT j.id AS id,
             value ->> '$.claim_id' AS claim_id,
             value ->> '$.error' AS error,
             value ->> '$.error_kind' AS error_kind,
             coalesce(value ->> '$.delay_s', 0) AS delay_s,
             (value ->> '$.retry') AND j.attempts < j.max_attempts AS again
      FROM json_each(:items)
      JOIN conveyor_jobs AS j ON j.id = value ->> '$.id') AS item
WHERE conveyor_jobs.id = item.id
  AND conveyor_jobs.claim_id = item.claim_id
  AND +conveyor_jobs.status = 'running'
RETURNING *;

-- name: heartbeat_jobs
-- :items is a JSON array of {"id", "claim_id"}; a null :extend_s keeps each claim's lease.
UPDATE conveyor_jobs
SET heartbeat_at = {now},
    lease_expires_at = {now} + coalesce(:extend_s, lease_seconds),
    updated_at = {now}
FROM (SELECT value ->> '$.id' AS id, value ->> '$.claim_id' AS claim_id
      FROM json_each(:items)) AS item
WHERE conveyor_jobs.id = item.id
  AND conveyor_jobs.claim_id = item.claim_id
  AND +conveyor_jobs.status = 'running'
RETURNING *;

-- name: progress_job
-- Absolute values, so a replayed call changes nothing; null leaves a field as it was.
-- Reporting progress also renews the lease.
UPDATE conveyor_jobs
SET progress_total = coalesce(:total, progress_total),
    progress_completed = coalesce(:completed, progress_completed),
    progress_failed = coalesce(:failed, progress_failed),
    progress_current = coalesce(:current, progress_current),
    progress_checkpoint = coalesce(:checkpoint, progress_checkpoint),
    progress_detail = coalesce(:detail, progress_detail),
    heartbeat_at = {now},
    lease_expires_at = {now} + lease_seconds,
    updated_at = {now}
WHERE id = :id AND claim_id = :claim_id AND status = 'running'
RETURNING *;

-- name: ack_claim
UPDATE conveyor_jobs
SET status = 'completed', finished_at = {now}, lease_expires_at = NULL, updated_at = {now}
WHERE claim_id = :claim_id AND status = 'running'
RETURNING id, queue;

-- name: release_claim
UPDATE conveyor_jobs
SET status = 'pending', claim_id = NULL, claimed_at = NULL, worker = NULL,
    heartbeat_at = NULL, lease_expires_at = NULL, updated_at = {now}
WHERE claim_id = :claim_id AND status = 'running'
RETURNING id, queue;

-- name: reset_claims
UPDATE conveyor_jobs
SET status = 'pending', claim_id = NULL, claimed_at = NULL, worker = NULL,
    heartbeat_at = NULL, lease_expires_at = NULL, updated_at = {now}
WHERE status = 'running' AND claimed_at <= {now} - :older_than_s
RETURNING id, queue;

-- name: recover_expired
-- Running jobs whose lease ran out: their worker died or hung. Back to pending while
-- attempts remain, otherwise failed for good. The checkpoint is kept for resume.
UPDATE conveyor_jobs
SET status = CASE WHEN attempts < max_attempts THEN 'pending' ELSE 'failed' END,
    finished_at = CASE WHEN attempts < max_attempts THEN NULL ELSE {now} END,
    error = 'lease expired: worker ' || coalesce(worker, '?') || ' stopped renewing its claim'
            || ' (attempt ' || attempts || ' of ' || max_attempts || ')',
    error_kind = 'retryable',
    claim_id = NULL, claimed_at = NULL, worker = NULL, heartbeat_at = NULL,
    lease_expires_at = NULL,
    updated_at = {now}
WHERE status = 'running' AND lease_expires_at < {now}
RETURNING id, queue, status;

-- name: reopen_job
-- An explicit retry: a final job becomes pending again with a fresh set of attempts.
UPDATE conveyor_jobs
SET status = 'pending', attempts = 0, run_at = {now}, result = NULL, finished_at = NULL,
    claim_id = NULL, claimed_at = NULL, worker = NULL, heartbeat_at = NULL,
    lease_expires_at = NULL, updated_at = {now}
WHERE id = :id AND status IN ('completed', 'failed', 'cancelled')
RETURNING *;

-- name: cancel_job
UPDATE conveyor_jobs
SET status = 'cancelled', finished_at = {now}, lease_expires_at = NULL, updated_at = {now}
WHERE id = :id AND status IN ('pending', 'running')
RETURNING *;

-- name: complete_by_key
UPDATE conveyor_jobs
SET status = 'completed', result = :result, finished_at = {now}, lease_expires_at = NULL,
    updated_at = {now}
WHERE queue = :queue AND key = :key AND status IN ('pending', 'running')
RETURNING id, queue;

-- name: get_job
SELECT * FROM conveyor_jobs WHERE id = :id;

-- name: list_jobs
SELECT * FROM conveyor_jobs
WHERE (:queue IS NULL OR queue = :queue)
  AND (:status IS NULL OR status = :status)
  AND (:key IS NULL OR key = :key)
  AND id > :after
ORDER BY id
LIMIT :limit;

-- name: list_jobs_newest
SELECT * FROM conveyor_jobs
WHERE (:queue IS NULL OR queue = :queue)
  AND (:status IS NULL OR status = :status)
  AND (:key IS NULL OR key = :key)
  AND (:before IS NULL OR id < :before)
ORDER BY id DESC
LIMIT :limit;

-- name: count_by_queue_status
SELECT queue, status, count(*) AS n FROM conveyor_jobs
WHERE (:queue IS NULL OR queue = :queue)
GROUP BY queue, status;

-- name: pending_summary
SELECT queue,
       min(created_at) AS oldest_pending_at,
       sum(CASE WHEN run_at > {now} THEN 1 ELSE 0 END) AS scheduled
FROM conveyor_jobs
WHERE status = 'pending' AND (:queue IS NULL OR queue = :queue)
GROUP BY queue;

-- name: expired_summary
SELECT queue, count(*) AS n FROM conveyor_jobs
WHERE status = 'running' AND lease_expires_at < {now} AND (:queue IS NULL OR queue = :queue)
GROUP BY queue;

-- name: prune_jobs
DELETE FROM conveyor_jobs
WHERE status IN (SELECT value FROM json_each(:statuses))
  AND finished_at <= {now} - :older_than_s;

-- name: db_now
SELECT {now} AS db_now;

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

-- name: jobs_by_id
SELECT * FROM conveyor_jobs WHERE id IN (SELECT value FROM json_each(:ids));

-- name: mark_notified
-- :items is a JSON array of {"job_id", "subscriber"}.
UPDATE conveyor_subscribers
SET notified_at = {now}, notifying_until = NULL
WHERE EXISTS (SELECT 1 FROM json_each(:items)
              WHERE value ->> '$.job_id' = conveyor_subscribers.job_id
                AND value ->> '$.subscriber' = conveyor_subscribers.subscriber);
