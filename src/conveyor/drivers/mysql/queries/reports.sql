-- What the holder of a claim reports. Every statement names the claim and changes
-- nothing once that claim no longer holds the job.

-- name: claimed_items_lock
-- :items is a JSON array of {"id", "claim_id", …}: those of its jobs that the named
-- claims still hold, locked (complete_jobs, fail_jobs, snooze_jobs, heartbeat_jobs).
-- By the primary key alone: the rows come by id (and claim), and MariaDB would
-- otherwise build a rowid filter from a status index for every call, reading the index's
-- range of the status, which grew with the table (60 to 500 ms a call at a million jobs,
-- ANALYZE FORMAT=JSON; benchmarks/growth.py). (Naming the primary key rather than the
-- indexes to ignore keeps the statement valid on a schema that lacks one of them.)
-- :one_claim, when every item names that one claim (a worker's batch, usually), with
-- their ids as :item_ids: a list of ids and one claim took 9.5 µs a job against 13.2
-- for the pairs out of JSON_TABLE (benchmarks/mariadb_reports.py, batches of 300).
SELECT id, queue, task, status, has_dependents FROM conveyor_jobs
  FORCE INDEX (PRIMARY)
WHERE status IN {from_complete}
  AND (id, claim_id) IN (                                              -- unless :one_claim
          SELECT id, claim_id FROM JSON_TABLE(:items, '$[*]' COLUMNS ( -- unless :one_claim
              id BIGINT PATH '$.id', claim_id {text} PATH '$.claim_id')) AS t) -- unless :one_claim
  AND id IN :item_ids AND claim_id = :one_claim                        -- if :one_claim
ORDER BY id
FOR UPDATE;

-- name: complete_update
-- Each item's "result" is JSON text or null; :results when any is not null. Without
-- results the items are not joined: a plain UPDATE of the locked ids took 24 µs a job
-- against 32 for the join (benchmarks/mariadb_reports.py, batches of 300).
UPDATE conveyor_jobs AS j
JOIN JSON_TABLE(:items, '$[*]' COLUMNS (                                      -- if :results
         id BIGINT PATH '$.id', result LONGTEXT PATH '$.result')) AS item ON item.id = j.id -- if :results
  FORCE INDEX (PRIMARY)                                                        -- unless :results
SET j.status = 'completed',
    j.result = item.result,                                                    -- if :results
    j.result = NULL,                                                           -- unless :results
    j.error = NULL,
    j.error_kind = NULL,
    j.finished_at = {now},
    j.lease_expires_at = NULL,
    j.updated_at = {now}
WHERE j.id IN :locked AND j.status IN {from_complete};

-- name: fail_update
-- One item of fail_jobs ({"id", "claim_id", "attempts", "again", "error", "error_kind",
-- "delay_s"}): back to pending after the delay when "again", else failed for good
-- (decided above, from the attempts read: the guard checks they still hold). MySQL
-- assigns from left to right, each assignment seeing the ones before it: the history
-- entry is written first (it reads worker), status and worker last.
UPDATE conveyor_jobs
SET errors = JSON_ARRAY_APPEND({errors_kept}, '$', JSON_OBJECT(
        'attempt', attempts, 'error', right(:error, 4000), 'kind', :error_kind,
        'at', {now}, 'worker', worker)),
    error = :error,
    error_kind = :error_kind,
    run_at = CASE WHEN :again THEN {now} + INTERVAL :delay_s SECOND ELSE run_at END,
    finished_at = CASE WHEN :again THEN NULL ELSE {now} END,
    claimed_at = CASE WHEN :again THEN NULL ELSE claimed_at END,
    heartbeat_at = CASE WHEN :again THEN NULL ELSE heartbeat_at END,
    lease_expires_at = NULL,
    updated_at = {now},
    worker = CASE WHEN :again THEN NULL ELSE worker END,
    status = CASE WHEN :again THEN 'pending' ELSE 'failed' END,
    claim_id = CASE WHEN :again THEN NULL ELSE claim_id END
WHERE id = :id AND claim_id = :claim_id AND attempts = :attempts
  AND status IN {from_fail_retry};

-- name: snooze_update
-- :items is a JSON array of {"id", "claim_id", "delay_s"}. Back to pending after the
-- delay without spending an attempt: waiting on something is not a failure. No delay
-- keeps a run_at already past: the job is due at once either way, and its run_at still
-- says when it first was (a schedule's slot, say).
UPDATE conveyor_jobs AS j
JOIN JSON_TABLE(:items, '$[*]' COLUMNS (
         id BIGINT PATH '$.id', delay_s DOUBLE PATH '$.delay_s')) AS item ON item.id = j.id
SET j.status = 'pending',
    j.attempts = greatest(j.attempts - 1, 0),
    j.run_at = IF(item.delay_s > 0, {now} + INTERVAL item.delay_s SECOND,
                  LEAST(j.run_at, {now})),
    j.claim_id = NULL, j.claimed_at = NULL, j.worker = NULL, j.heartbeat_at = NULL,
    j.lease_expires_at = NULL,
    j.updated_at = {now}
WHERE j.id IN :locked AND j.status IN {from_snooze};

-- name: heartbeat_update
-- A null :extend_s keeps each claim's lease.
UPDATE conveyor_jobs FORCE INDEX (PRIMARY)
SET heartbeat_at = {now},
    lease_expires_at = {now} + INTERVAL coalesce(:extend_s, lease_seconds) SECOND,
    updated_at = {now}
WHERE id IN :locked AND status IN {from_heartbeat};

-- name: progress_job_lock
SELECT id, queue, task, status, has_dependents FROM conveyor_jobs
WHERE id = :id AND claim_id = :claim_id AND status IN {from_heartbeat}
FOR UPDATE;

-- name: progress_job_update
-- Absolute values, so a replayed call changes nothing; null leaves a field as it was.
-- Reporting progress also renews the lease.
UPDATE conveyor_jobs FORCE INDEX (PRIMARY)
SET progress_total = coalesce(:total, progress_total),
    progress_completed = coalesce(:completed, progress_completed),
    progress_failed = coalesce(:failed, progress_failed),
    progress_current = coalesce(:current, progress_current),
    progress_checkpoint = coalesce(:checkpoint, progress_checkpoint),
    progress_detail = coalesce(:detail, progress_detail),
    heartbeat_at = {now},
    lease_expires_at = {now} + INTERVAL lease_seconds SECOND,
    updated_at = {now}
WHERE id IN :locked AND status IN {from_heartbeat};
