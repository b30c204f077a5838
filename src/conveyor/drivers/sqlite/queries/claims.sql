-- Claims: taking jobs, and handing them back.

-- name: claim_jobs
-- The fast path: queues without flow control (pause, limits) only.
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
    -- The unary + keeps the planner on the claimable index, in claim order: driven by
    -- run_at it would sort every due job to take the first few. SQLite uses a partial
    -- index only when the query names its condition as written (status = 'pending'; the
    -- guard's status IN ('pending') does not match it): without that term the claim
    -- walked the status index over every pending job and sorted them all.
    SELECT id FROM conveyor_jobs
    WHERE queue = :queue AND status IN {from_claim} AND status = 'pending'
      AND waiting_for = 0 AND +run_at <= {now}
    ORDER BY priority, id
    LIMIT :limit)
  AND NOT EXISTS (SELECT 1 FROM conveyor_queues AS c WHERE c.queue = :queue AND c.controlled)
RETURNING *;

-- name: claim_ids
-- Jobs named by id: :ids (a JSON array), or the one job :id (claimable while pending
-- with its dependencies met). :ids is the flow-controlled path: the jobs chosen under
-- the queue's limits. Still guarded; the unary + keep the ids driving the plan (rowid
-- lookups), not the status index, which would visit every pending job.
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
WHERE id IN (SELECT value FROM json_each(:ids)) AND +status IN {from_claim} AND +waiting_for = 0  -- if :ids
WHERE id = :id AND status IN {from_claim_job} AND waiting_for = 0  -- if :id
RETURNING *;

-- name: count_claimable
-- Claimable now: pending, minus those not yet due or waiting on others. Counted from
-- the counts table and two small index ranges, never the backlog; 0 while paused.
-- (deltas: SQLite keeps its counts exact in place, with nothing to fold; :deltas_limit
-- goes unused.)
SELECT 0 AS deltas, CASE
    WHEN EXISTS (SELECT 1 FROM conveyor_queues WHERE queue = :queue AND paused) THEN 0
    ELSE coalesce((SELECT sum(n) FROM conveyor_counts WHERE queue = :queue AND status = 'pending'), 0)
         - (SELECT count(*) FROM conveyor_jobs
            WHERE queue = :queue AND status = 'pending' AND run_at > created_at
              AND run_at > {now})
         - (SELECT count(*) FROM conveyor_jobs
            WHERE queue = :queue AND status = 'pending' AND waiting_for > 0
              AND run_at <= {now})
    END AS n;

-- name: ack_claim
UPDATE conveyor_jobs
SET status = 'completed', error = NULL, error_kind = NULL, finished_at = {now},
    lease_expires_at = NULL, updated_at = {now}
WHERE claim_id = :claim_id AND status IN {from_ack}
RETURNING id, queue, task;

-- name: release_jobs
-- Running jobs back to pending, their claim forgotten: those of :claim_id (a worker hands
-- its claim back), the job :id (an admin's reset, whoever holds it), or those claimed
-- more than :older_than_s ago; of :queues and :tasks (JSON arrays), when given.
UPDATE conveyor_jobs
SET key = conveyor_jobs.key,  -- fires the count trigger (migration 0018)
    status = 'pending', claim_id = NULL, claimed_at = NULL, worker = NULL,
    heartbeat_at = NULL, lease_expires_at = NULL, updated_at = {now}
WHERE true
  AND claim_id = :claim_id AND status IN {from_release}  -- if :claim_id
  AND id = :id AND status IN {from_release_job}  -- if :id
  AND status IN {from_reset_claims} AND claimed_at <= {now} - :older_than_s  -- if :older_than_s
  AND queue IN (SELECT value FROM json_each(:queues))  -- if :queues
  AND task IN (SELECT value FROM json_each(:tasks))  -- if :tasks
RETURNING id, queue  -- unless :id
RETURNING *  -- if :id
;

-- name: expired_leases
-- Running jobs whose lease ran out: their worker died or hung. What ends them is
-- decided above (conveyor.machine), then written by end_leases.
SELECT id, queue, claim_id, worker, attempts, max_attempts
FROM conveyor_jobs
WHERE status IN {from_recover_retry} AND lease_expires_at < {now}
  AND queue IN (SELECT value FROM json_each(:queues))  -- if :queues
  AND id = :id  -- if :id
  AND task IN (SELECT value FROM json_each(:tasks))  -- if :tasks
ORDER BY lease_expires_at
LIMIT :limit;

-- name: end_leases
-- :items is a JSON array of {"id", "claim_id", "again", "error", "cause"}: back to
-- pending when "again", else failed for good. Guarded: the same claim, still expired.
-- The checkpoint is kept for resume; the attempt's error joins the job's history.
UPDATE conveyor_jobs
SET key = conveyor_jobs.key,  -- fires the count trigger (migration 0018)
    status = CASE WHEN item.again THEN 'pending' ELSE 'failed' END,
    finished_at = CASE WHEN item.again THEN NULL ELSE {now} END,
    error = item.error,
    error_kind = 'retryable',
    errors = json_insert({errors_kept}, '$[#]', json_object(
        'attempt', conveyor_jobs.attempts, 'kind', 'retryable', 'at', {now},
        'worker', conveyor_jobs.worker, 'error', item.cause)),
    claim_id = NULL, claimed_at = NULL, worker = NULL, heartbeat_at = NULL,
    lease_expires_at = NULL,
    updated_at = {now}
FROM (SELECT value ->> '$.id' AS id,
             value ->> '$.claim_id' AS claim_id,
             value ->> '$.again' AS again,
             value ->> '$.error' AS error,
             value ->> '$.cause' AS cause
      FROM json_each(:items)) AS item
WHERE conveyor_jobs.id = item.id
  AND conveyor_jobs.claim_id = item.claim_id
  AND +conveyor_jobs.status IN {from_recover_retry}
  AND conveyor_jobs.lease_expires_at < {now}
RETURNING conveyor_jobs.id, conveyor_jobs.queue, conveyor_jobs.status;
