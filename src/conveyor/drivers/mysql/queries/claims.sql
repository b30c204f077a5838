-- Claims: taking jobs, and handing them back. The *_lock statements pick and lock the
-- rows a handler then changes (see admin.sql).

-- name: claim_jobs_lock
-- The fast path: queues without flow control (pause, limits) only. SKIP LOCKED:
-- concurrent claimers take different rows instead of queueing on one. Always on the
-- claimable index, in claim order: a plan that sorts (on the due index, say) locks
-- every row it reads before the sort, so the claimers beside it skipped the whole
-- backlog and found nothing. The rows are read whole (packed, with :packed: see
-- jobs_locked) with the instant of the claim and its lease's end, which claim_update
-- writes: the claim handler gives back these rows as the update left them, unread.
SELECT {job_row}, id, queue, task, status, has_dependents,  -- if :packed
SELECT {job_columns}, has_dependents,  -- unless :packed
       {now} AS claim_at, {now} + INTERVAL :lease_s SECOND AS claim_expires
FROM conveyor_jobs FORCE INDEX (conveyor_jobs_claimable)
WHERE queue = :queue AND status IN {from_claim} AND waiting_for = 0 AND run_at <= {now}
  AND NOT EXISTS (SELECT 1 FROM conveyor_queues AS c WHERE c.queue = :queue AND c.controlled)
ORDER BY priority, id
LIMIT :limit
FOR UPDATE SKIP LOCKED;

-- name: claim_ids_lock
-- Jobs named by id: :ids (a JSON array), or the one job :id (claimable while pending
-- with its dependencies met). :ids is the flow-controlled path: the jobs chosen under
-- the queue's limits, while the queue's settings row is locked. Still guarded. Read
-- as claim_jobs_lock reads its rows.
SELECT {job_row}, id, queue, task, status, has_dependents,  -- if :packed
SELECT {job_columns}, has_dependents,  -- unless :packed
       {now} AS claim_at, {now} + INTERVAL :lease_s SECOND AS claim_expires
FROM conveyor_jobs
WHERE id IN (SELECT id FROM JSON_TABLE(:ids, '$[*]' COLUMNS (id BIGINT PATH '$')) AS t)  -- if :ids
  AND status IN {from_claim} AND waiting_for = 0  -- if :ids
WHERE id = :id AND status IN {from_claim_job} AND waiting_for = 0  -- if :id
FOR UPDATE;

-- name: claim_update
-- What every claim does to the jobs it took. Every UPDATE of jobs named by id goes by
-- the primary key (FORCE INDEX): left to choose, MariaDB takes the range of the status
-- index, which it must then change under itself (buffering the rows first), or, where
-- the queue is not named, the whole of a status (every running job, for a heartbeat).
-- :claim_at and :claim_expires are the lock's. handlers.CLAIMED writes the same into
-- the rows the lock read: keep the two alike.
UPDATE conveyor_jobs FORCE INDEX (PRIMARY)
SET status = 'running',
    attempts = attempts + 1,
    claim_id = :claim_id,
    worker = :worker,
    claimed_at = :claim_at,
    heartbeat_at = :claim_at,
    started_at = :claim_at,
    lease_seconds = :lease_s,
    lease_expires_at = :claim_expires,
    updated_at = :claim_at
WHERE id IN :locked AND status IN {from_claim} AND waiting_for = 0;

-- name: count_claimable
-- Claimable now: pending, minus those not yet due or waiting on others. Counted from
-- the counts and two small index ranges, never the backlog; 0 while paused. Also how
-- many count deltas wait, up to :deltas_limit: the caller folds them when they pile up,
-- and a count of them all would read every one.
SELECT (SELECT count(*) FROM (SELECT 1 FROM conveyor_count_deltas LIMIT :deltas_limit) AS d) AS deltas,
CASE
    WHEN EXISTS (SELECT 1 FROM conveyor_queues WHERE queue = :queue AND paused) THEN 0
    ELSE CAST(coalesce((SELECT sum(n) FROM (
                           SELECT n FROM conveyor_counts
                           WHERE queue = :queue AND status = 'pending'
                           UNION ALL
                           SELECT n FROM conveyor_count_deltas
                           WHERE queue = :queue AND status = 'pending') AS parts), 0)
              - (SELECT count(*) FROM conveyor_jobs
                 WHERE queue = :queue AND pending_run_at > {now} AND run_at > created_at)
              - (SELECT count(*) FROM conveyor_jobs
                 WHERE queue = :queue AND status = 'pending' AND waiting_for > 0
                   AND run_at <= {now}) AS SIGNED)
    END AS n;

-- name: ack_claim_lock
SELECT id, queue, task, status, has_dependents FROM conveyor_jobs
WHERE running_claim = :claim_id AND status IN {from_ack}
FOR UPDATE;

-- name: ack_claim_update
UPDATE conveyor_jobs FORCE INDEX (PRIMARY)
SET status = 'completed', error = NULL, error_kind = NULL, finished_at = {now},
    lease_expires_at = NULL, updated_at = {now}
WHERE id IN :locked AND status IN {from_ack};

-- name: release_jobs_lock
-- Running jobs back to pending, their claim forgotten: those of :claim_id (a worker hands
-- its claim back), the job :id (an admin's reset, whoever holds it), or those claimed
-- more than :older_than_s ago; of :queues and :tasks (JSON arrays), when given.
SELECT id, queue, task, status, has_dependents FROM conveyor_jobs
WHERE true
  AND running_claim = :claim_id AND status IN {from_release}  -- if :claim_id
  AND id = :id AND status IN {from_release_job}  -- if :id
  AND status IN {from_reset_claims} AND claimed_at <= {now} - INTERVAL :older_than_s SECOND  -- if :older_than_s
  AND queue IN (SELECT q FROM JSON_TABLE(:queues, '$[*]' COLUMNS (q {text} PATH '$')) AS t)  -- if :queues
  AND task IN (SELECT v FROM JSON_TABLE(:tasks, '$[*]' COLUMNS (v {text} PATH '$')) AS k)  -- if :tasks
FOR UPDATE;

-- name: release_update
-- Back to pending, the claim forgotten (release_jobs).
UPDATE conveyor_jobs FORCE INDEX (PRIMARY)
SET status = 'pending', claim_id = NULL, claimed_at = NULL, worker = NULL,
    heartbeat_at = NULL, lease_expires_at = NULL, updated_at = {now}
WHERE id IN :locked AND status IN {from_release};

-- name: expired_leases
-- Running jobs whose lease ran out: their worker died or hung. What ends them is
-- decided above (conveyor.machine), then written by end_leases.
SELECT id, queue, claim_id, worker, attempts, max_attempts
FROM conveyor_jobs
WHERE status IN {from_recover_retry} AND lease_expires_at < {now}
  AND queue IN (SELECT q FROM JSON_TABLE(:queues, '$[*]' COLUMNS (q {text} PATH '$')) AS t)  -- if :queues
  AND id = :id  -- if :id
  AND task IN (SELECT v FROM JSON_TABLE(:tasks, '$[*]' COLUMNS (v {text} PATH '$')) AS k)  -- if :tasks
ORDER BY lease_expires_at
LIMIT :limit;

-- name: end_leases_lock
-- :items is a JSON array of {"id", "claim_id", "again", "error", "cause"}. Guarded: the
-- same claim, still expired. By the primary key alone (see reports.sql,
-- claimed_items_lock).
SELECT id, queue, task, status, has_dependents FROM conveyor_jobs
  FORCE INDEX (PRIMARY)
WHERE (id, claim_id) IN (
          SELECT id, claim_id FROM JSON_TABLE(:items, '$[*]' COLUMNS (
              id BIGINT PATH '$.id', claim_id {text} PATH '$.claim_id')) AS t)
  AND status IN {from_recover_retry} AND lease_expires_at < {now}
ORDER BY id
FOR UPDATE;

-- name: end_lease_update
-- One item of end_leases: back to pending when "again", else failed for good. The
-- checkpoint is kept for resume; the attempt's error joins the job's history. Assigned
-- from left to right: the history entry reads worker before it is cleared.
UPDATE conveyor_jobs
SET errors = JSON_ARRAY_APPEND({errors_kept}, '$', JSON_OBJECT(
        'attempt', attempts, 'kind', 'retryable', 'at', {now}, 'worker', worker,
        'error', :cause)),
    status = CASE WHEN :again THEN 'pending' ELSE 'failed' END,
    finished_at = CASE WHEN :again THEN NULL ELSE {now} END,
    error = :error,
    error_kind = 'retryable',
    claim_id = NULL, claimed_at = NULL, heartbeat_at = NULL, lease_expires_at = NULL,
    updated_at = {now},
    worker = NULL
WHERE id = :id AND status IN {from_recover_retry};
