-- Retention policies and the pruning they lead to.

-- name: save_retention
-- A new policy only while fewer than :cap exist; the one of (queue, task, status) is
-- replaced whatever their number.
INSERT INTO {schema}.conveyor_retention
    (queue, task, status, keep_seconds, archive, retire_keys, updated_at)
SELECT :queue, :task, :status, :keep_seconds, :archive, :retire_keys, now()
WHERE (SELECT count(*) FROM {schema}.conveyor_retention) < :cap
   OR EXISTS (SELECT 1 FROM {schema}.conveyor_retention
              WHERE queue = :queue AND task = :task AND status = :status)
ON CONFLICT (queue, task, status) DO UPDATE
SET keep_seconds = excluded.keep_seconds, archive = excluded.archive,
    retire_keys = excluded.retire_keys, updated_at = excluded.updated_at;

-- name: delete_retention
DELETE FROM {schema}.conveyor_retention
WHERE queue = :queue AND task = :task
  AND status = :status -- if :status
RETURNING status;

-- name: list_retention
-- Every policy; with :lock, writers of policies take their turn: each one's guard then
-- counts what the others committed (a statement's snapshot is taken after the lock is
-- granted).
SELECT queue, task, status, keep_seconds, archive, retire_keys, updated_at
FROM {schema}.conveyor_retention
ORDER BY status, queue, task
FOR UPDATE  -- if :lock
;

-- name: expired_jobs
-- Final jobs of one policy, oldest ids first, that no more specific policy covers.
SELECT * FROM {schema}.conveyor_jobs AS j
WHERE j.status = :status
  AND j.id > :after
  AND j.finished_at <= now() - make_interval(secs => :keep_seconds)
  AND j.queue = :queue -- if :queue
  AND j.task = :task -- if :task
  AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(:exclude::jsonb) AS e(v)
                  WHERE e.v->>0 IN ('', j.queue) AND e.v->>1 IN ('', j.task))
ORDER BY j.id
LIMIT :limit;

-- name: lock_expired
-- The same among :ids, each looked up by its primary key (a lateral subquery per id,
-- whatever the planner's statistics say), locked (rows held elsewhere skipped).
SELECT j.* FROM jsonb_array_elements_text(:ids::jsonb) AS i(v)
CROSS JOIN LATERAL (
    SELECT * FROM {schema}.conveyor_jobs AS c
    WHERE c.id = i.v::bigint
      AND c.status = :status
      AND c.finished_at <= now() - make_interval(secs => :keep_seconds)
      AND c.queue = :queue -- if :queue
      AND c.task = :task -- if :task
      AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(:exclude::jsonb) AS e(v)
                      WHERE e.v->>0 IN ('', c.queue) AND e.v->>1 IN ('', c.task))
    FOR UPDATE SKIP LOCKED
) AS j
ORDER BY j.id;

-- name: retire_keys
-- One record per key: the newest job's, when the batch holds several jobs of a key.
INSERT INTO {schema}.conveyor_retired_keys
    (queue, key, job_id, task, status, attempts, max_attempts, created_at, finished_at,
     retired_at)
SELECT DISTINCT ON (queue, key)
       queue, key, id, task, status, attempts, max_attempts, created_at, finished_at, now()
FROM {schema}.conveyor_jobs
WHERE id = ANY (ARRAY(SELECT jsonb_array_elements_text(:ids::jsonb)::bigint)) AND key IS NOT NULL
ORDER BY queue, key, id DESC
ON CONFLICT (queue, key) DO UPDATE
SET job_id = excluded.job_id, task = excluded.task, status = excluded.status,
    attempts = excluded.attempts, max_attempts = excluded.max_attempts,
    created_at = excluded.created_at, finished_at = excluded.finished_at,
    retired_at = excluded.retired_at
WHERE excluded.job_id > {schema}.conveyor_retired_keys.job_id;

-- name: retired_key
SELECT *, now() AS db_now FROM {schema}.conveyor_retired_keys
WHERE queue = :queue AND key = :key
  AND task = :task -- if :task
;
