-- What the holder of a claim reports. Every statement names the claim and changes
-- nothing once that claim no longer holds the job.
--
-- The unary + on status keeps the planner from driving a batch update through the
-- status index (every running job, each probing the whole batch): it walks the batch
-- instead and finds each job by id.

-- name: complete_jobs
-- :items is a JSON array of {"id", "claim_id", "result" (JSON text or null)}; :brief:
-- answer only what a worker needs of each job.
UPDATE conveyor_jobs
SET status = 'completed',
    result = item.result,
    error = NULL,
    error_kind = NULL,
    finished_at = {now},
    lease_expires_at = NULL,
    updated_at = {now}
FROM (SELECT value ->> '$.id' AS id,
             value ->> '$.claim_id' AS claim_id,
             value ->> '$.result' AS result
      FROM json_each(:items)) AS item
WHERE conveyor_jobs.id = item.id
  AND conveyor_jobs.claim_id = item.claim_id
  AND +conveyor_jobs.status IN {from_complete}
RETURNING *  -- unless :brief
RETURNING conveyor_jobs.id, conveyor_jobs.queue, conveyor_jobs.status,  -- if :brief
          conveyor_jobs.task  -- if :brief
;

-- name: fail_jobs
-- :items is a JSON array of {"id", "claim_id", "attempts", "again", "error",
-- "error_kind", "delay_s"}: back to pending after the delay when "again", else failed
-- for good (decided above, from the attempts read: the guard checks they still hold).
UPDATE conveyor_jobs
SET key = conveyor_jobs.key,  -- fires the count trigger (migration 0018)
    status = CASE WHEN item.again THEN 'pending' ELSE 'failed' END,
    run_at = CASE WHEN item.again THEN {now} + item.delay_s ELSE conveyor_jobs.run_at END,
    finished_at = CASE WHEN item.again THEN NULL ELSE {now} END,
    claim_id = CASE WHEN item.again THEN NULL ELSE conveyor_jobs.claim_id END,
    claimed_at = CASE WHEN item.again THEN NULL ELSE conveyor_jobs.claimed_at END,
    worker = CASE WHEN item.again THEN NULL ELSE conveyor_jobs.worker END,
    heartbeat_at = CASE WHEN item.again THEN NULL ELSE conveyor_jobs.heartbeat_at END,
    lease_expires_at = NULL,
    error = item.error,
    error_kind = item.error_kind,
    errors = json_insert({errors_kept}, '$[#]', json_object(
        'attempt', conveyor_jobs.attempts, 'error', substr(item.error, -4000),
        'kind', item.error_kind, 'at', {now}, 'worker', conveyor_jobs.worker)),
    updated_at = {now}
FROM (SELECT value ->> '$.id' AS id,
             value ->> '$.claim_id' AS claim_id,
             value ->> '$.attempts' AS attempts,
             value ->> '$.again' AS again,
             value ->> '$.error' AS error,
             value ->> '$.error_kind' AS error_kind,
             coalesce(value ->> '$.delay_s', 0) AS delay_s
      FROM json_each(:items)) AS item
WHERE conveyor_jobs.id = item.id
  AND conveyor_jobs.claim_id = item.claim_id
  AND conveyor_jobs.attempts = item.attempts
  AND +conveyor_jobs.status IN {from_fail_retry}
RETURNING *;

-- name: snooze_jobs
-- :items is a JSON array of {"id", "claim_id", "delay_s"}. Back to pending after the
-- delay without spending an attempt: waiting on something is not a failure. No delay
-- keeps a run_at already past: the job is due at once either way, and its run_at still
-- says when it first was (a schedule's slot, say).
UPDATE conveyor_jobs
SET key = conveyor_jobs.key,  -- fires the count trigger (migration 0018)
    status = 'pending',
    attempts = max(conveyor_jobs.attempts - 1, 0),
    run_at = CASE WHEN item.delay_s > 0 THEN {now} + item.delay_s
                  ELSE min(conveyor_jobs.run_at, {now}) END,
    claim_id = NULL, claimed_at = NULL, worker = NULL, heartbeat_at = NULL,
    lease_expires_at = NULL,
    updated_at = {now}
FROM (SELECT value ->> '$.id' AS id,
             value ->> '$.claim_id' AS claim_id,
             value ->> '$.delay_s' AS delay_s
      FROM json_each(:items)) AS item
WHERE conveyor_jobs.id = item.id
  AND conveyor_jobs.claim_id = item.claim_id
  AND +conveyor_jobs.status IN {from_snooze}
RETURNING *;

-- name: heartbeat_jobs
-- :items is a JSON array of {"id", "claim_id"}; a null :extend_s keeps each claim's lease;
-- :brief: answer only the ids still held (a worker's background renewal).
UPDATE conveyor_jobs
SET heartbeat_at = {now},
    lease_expires_at = {now} + coalesce(:extend_s, lease_seconds),
    updated_at = {now}
FROM (SELECT value ->> '$.id' AS id, value ->> '$.claim_id' AS claim_id
      FROM json_each(:items)) AS item
WHERE conveyor_jobs.id = item.id
  AND conveyor_jobs.claim_id = item.claim_id
  AND +conveyor_jobs.status IN {from_heartbeat}
RETURNING *  -- unless :brief
RETURNING conveyor_jobs.id  -- if :brief
;

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
WHERE id = :id AND claim_id = :claim_id AND status IN {from_heartbeat}
RETURNING *;

-- name: count_moves
-- The counts of a claim, or of an ending that completed running jobs, which the row
-- trigger leaves to them since migration 0018 (counting.py): :moves is a JSON array of
-- [queue, status, task, change]. On a database one migration behind, whose trigger
-- counted them already, nothing is written (the migration's row, read in the same
-- transaction, says which).
INSERT INTO conveyor_counts (queue, status, task, n)
SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3 FROM json_each(:moves)
WHERE EXISTS (SELECT 1 FROM conveyor_migrations WHERE version = 18)
ON CONFLICT (queue, status, task) DO UPDATE SET n = n + excluded.n;

-- name: count_completions
-- The same for the throughput chart: :completed is a JSON array of [queue, jobs].
INSERT INTO conveyor_throughput (minute, queue, completed, failed)
SELECT CAST({now} / 60 AS INTEGER) * 60, value ->> 0, value ->> 1, 0
FROM json_each(:completed)
WHERE EXISTS (SELECT 1 FROM conveyor_migrations WHERE version = 18)
ON CONFLICT (minute, queue) DO UPDATE SET completed = completed + excluded.completed;
