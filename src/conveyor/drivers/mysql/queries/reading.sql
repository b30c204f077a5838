-- Reading jobs and counts.

-- name: get_job
-- One job (:id), the jobs :ids (a JSON array), or the steps of the run :workflow_id.
SELECT *, {now} AS db_now FROM conveyor_jobs
WHERE id = :id  -- if :id
WHERE id IN (SELECT id FROM JSON_TABLE(:ids, '$[*]' COLUMNS (id BIGINT PATH '$')) AS t)  -- if :ids
WHERE workflow_id = :workflow_id  -- if :workflow_id
ORDER BY id  -- if :workflow_id
;

-- name: list_jobs
-- Each filter is a line of its own, kept only when given (see Statements): every
-- combination is a plain conjunction that an index serves. With a status, the primary
-- key is not used for the order: the optimizer takes matching jobs to be spread evenly
-- over the ids, so for a few pending jobs among millions of finished ones it walked the
-- primary key from the oldest job (benchmarks/growth.py); (status, id) and (status,
-- queue, id) give the same order and reach the matching jobs at once.
SELECT * FROM conveyor_jobs
  IGNORE INDEX FOR ORDER BY (PRIMARY)     -- if :status
WHERE true
  AND id > :after                         -- if :after
  AND id < :before                        -- if :before
  AND queue = :queue                      -- if :queue
  AND status = :status                    -- if :status
  AND `key` = :key                        -- if :key
  AND task = :task                        -- if :task
  AND created_at >= :created_after        -- if :created_after
  AND created_at < :created_before        -- if :created_before
ORDER BY id                               -- unless :newest
ORDER BY id DESC                          -- if :newest
LIMIT :limit;

-- name: dependents
SELECT job_id FROM conveyor_dependencies WHERE depends_on = :id ORDER BY job_id;

-- name: subscribers
SELECT subscriber FROM conveyor_subscribers
WHERE job_id = :job_id
  AND subscriber = :subscriber  -- if :subscriber
ORDER BY created_at, subscriber;

-- name: count_by_queue_status
-- Jobs per queue and status (of :queue when given), or with :per_task per queue, task and
-- status: the folded counts plus the deltas not yet folded.
SELECT queue, status, CAST(sum(n) AS SIGNED) AS n  -- unless :per_task
SELECT queue, task, status, CAST(sum(n) AS SIGNED) AS n  -- if :per_task
FROM (SELECT queue, task, status, n FROM conveyor_counts
      UNION ALL
      SELECT queue, task, status, n FROM conveyor_count_deltas) AS parts
WHERE true
  AND queue = :queue  -- if :queue
GROUP BY queue, status  -- unless :per_task
GROUP BY queue, task, status  -- if :per_task
HAVING sum(n) <> 0;

-- name: count_deltas
-- How many deltas wait to be folded, counted no further than :limit.
SELECT count(*) AS n FROM (SELECT 1 FROM conveyor_count_deltas LIMIT :limit) AS d;

-- name: count_moves
-- The deltas of one statement that changed jobs' states (:moves, JSON: [queue, status,
-- task, net change, jobs that entered the status]), written where the fold finds them.
INSERT INTO conveyor_count_deltas (queue, status, task, n, entered, at)
SELECT queue, status, task, n, entered, {now}
FROM JSON_TABLE(:moves, '$[*]' COLUMNS (
    queue {text} PATH '$[0]', status VARCHAR(16) PATH '$[1]', task {text} PATH '$[2]',
    n INT PATH '$[3]', entered INT PATH '$[4]')) AS t;

-- name: fold_take
-- The fold_counts handler: a batch of deltas, locked; those another folder holds, or
-- that belong to transactions not yet committed, are skipped.
SELECT id FROM conveyor_count_deltas ORDER BY id LIMIT :limit FOR UPDATE SKIP LOCKED;

-- name: fold_counts_add
INSERT INTO conveyor_counts (queue, status, task, n)
SELECT queue, status, task, sum(n) FROM conveyor_count_deltas
WHERE id IN :locked
GROUP BY queue, status, task
ORDER BY queue, status, task
ON DUPLICATE KEY UPDATE n = conveyor_counts.n + VALUES(n);

-- name: fold_throughput_add
INSERT INTO conveyor_throughput (minute, queue, completed, failed)
SELECT {minute_of_at}, queue,
       sum(CASE WHEN status = 'completed' THEN entered ELSE 0 END),
       sum(CASE WHEN status = 'failed' THEN entered ELSE 0 END)
FROM conveyor_count_deltas
WHERE id IN :locked AND status IN ('completed', 'failed') AND entered > 0
GROUP BY 1, 2
ORDER BY 1, 2
ON DUPLICATE KEY UPDATE completed = conveyor_throughput.completed + VALUES(completed),
                        failed = conveyor_throughput.failed + VALUES(failed);

-- name: fold_forget
-- The ids joined as a table (:ids, JSON), in that order, into the primary key: on this
-- small table MariaDB runs DELETE … WHERE id IN (…), or the join the other way round
-- (a table of five deltas, say), as a scan that waits on the deltas every open
-- transaction has just written, and folders waiting so deadlock each other.
DELETE d FROM JSON_TABLE(:ids, '$[*]' COLUMNS (id BIGINT PATH '$')) AS t
STRAIGHT_JOIN conveyor_count_deltas AS d FORCE INDEX (PRIMARY) ON d.id = t.id;

-- name: pending_queues
-- The queues with pending jobs (the counts folded and not): pending_summary's first step.
SELECT queue FROM (SELECT queue, n FROM conveyor_counts WHERE status = 'pending'
                   UNION ALL
                   SELECT queue, n FROM conveyor_count_deltas
                   WHERE status = 'pending') AS parts
WHERE true
  AND queue = :queue  -- if :queue
GROUP BY queue HAVING sum(n) > 0;

-- name: pending_summary_of
-- One queue: since when its oldest job that is due has been due (an index probe,
-- stepping over jobs not yet due) and how many are not yet due (an index range). The
-- indexes are named: left to itself the optimizer walked the primary key for the
-- oldest, stepping over every finished job first. The queue is a constant, one
-- statement per queue (handlers.pending_summary): as a subquery's outer reference it
-- made the optimizer read conveyor_jobs_due by the queue alone, an entry per finished
-- job of that queue (over 77 s a call at ten million jobs; benchmarks/growth.py).
SELECT :queue AS queue,
       (SELECT j.run_at FROM conveyor_jobs AS j FORCE INDEX (conveyor_jobs_status)
        WHERE j.status = 'pending' AND j.run_at <= {now} AND j.queue = :queue
        ORDER BY j.id LIMIT 1) AS oldest_pending_at,
       (SELECT count(*) FROM conveyor_jobs AS j FORCE INDEX (conveyor_jobs_due)
        WHERE j.queue = :queue AND j.pending_run_at > {now}
          AND j.run_at > j.created_at) AS scheduled;

-- name: expired_summary
SELECT queue, count(*) AS n FROM conveyor_jobs
WHERE status = 'running' AND lease_expires_at < {now}
  AND queue = :queue  -- if :queue
GROUP BY queue;

-- name: throughput
-- Jobs completed and failed per minute since :since, folded or not.
SELECT minute, CAST(sum(completed) AS SIGNED) AS completed, CAST(sum(failed) AS SIGNED) AS failed
FROM (SELECT minute, queue, completed, failed FROM conveyor_throughput
      UNION ALL
      SELECT {minute_of_at}, queue,
             CASE WHEN status = 'completed' THEN entered ELSE 0 END,
             CASE WHEN status = 'failed' THEN entered ELSE 0 END
      FROM conveyor_count_deltas
      WHERE status IN ('completed', 'failed') AND entered > 0) AS parts
WHERE minute >= :since
  AND queue = :queue  -- if :queue
GROUP BY minute
ORDER BY minute;

-- name: db_now
SELECT {now} AS db_now;
