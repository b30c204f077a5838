-- Counts per queue, status and task, kept by the same statement triggers, so
-- task_stats() reads a few rows of counts instead of an index entry per job (5.6 s at
-- ten million jobs: benchmarks/growth.py), and the (queue, task, status) index it read
-- goes: every claim and every ending wrote it. Readers of a queue's counts add up its
-- tasks' rows.

-- No job may change while the counts start again, or it would be counted twice or never.
LOCK TABLE {schema}.conveyor_jobs IN SHARE ROW EXCLUSIVE MODE;

-- The deltas not yet folded carry throughput the chart still needs: folded into it
-- first (as fold_counts does), then the counts are recounted from the jobs themselves.
INSERT INTO {schema}.conveyor_throughput AS t (minute, queue, completed, failed)
SELECT date_trunc('minute', at), queue,
       coalesce(sum(entered) FILTER (WHERE status = 'completed'), 0),
       coalesce(sum(entered) FILTER (WHERE status = 'failed'), 0)
FROM {schema}.conveyor_count_deltas
WHERE status IN ('completed', 'failed') AND entered > 0
GROUP BY 1, 2
ON CONFLICT (minute, queue) DO UPDATE
SET completed = t.completed + excluded.completed, failed = t.failed + excluded.failed;
DELETE FROM {schema}.conveyor_count_deltas;
ALTER TABLE {schema}.conveyor_count_deltas ADD COLUMN task text NOT NULL;

DROP TABLE {schema}.conveyor_counts;
CREATE TABLE {schema}.conveyor_counts (
    queue  text   NOT NULL,
    status text   NOT NULL,
    task   text   NOT NULL,
    n      bigint NOT NULL,
    PRIMARY KEY (queue, status, task)
);
INSERT INTO {schema}.conveyor_counts (queue, status, task, n)
SELECT queue, status, task, count(*) FROM {schema}.conveyor_jobs GROUP BY queue, status, task;

CREATE OR REPLACE FUNCTION {schema}.conveyor_count_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.conveyor_count_deltas (queue, status, task, n, entered, at)
    SELECT queue, status, task, count(*), count(*), now() FROM new_rows
    GROUP BY queue, status, task;
    RETURN NULL;
END
$$;

-- A job's queue and task never change, only its status. (The plan is kept per
-- connection: without nested loops it is a hash join at every size; see 0006.)
CREATE OR REPLACE FUNCTION {schema}.conveyor_count_changed() RETURNS trigger
LANGUAGE plpgsql SET enable_nestloop = off AS $$
BEGIN
    INSERT INTO {schema}.conveyor_count_deltas (queue, status, task, n, entered, at)
    SELECT queue, status, task, sum(n), sum(entered), now()
    FROM (SELECT after.queue, after.status, after.task, 1 AS n, 1 AS entered
          FROM new_rows AS after JOIN old_rows AS before ON before.id = after.id
          WHERE before.status <> after.status
          UNION ALL
          SELECT before.queue, before.status, before.task, -1, 0
          FROM new_rows AS after JOIN old_rows AS before ON before.id = after.id
          WHERE before.status <> after.status) AS moved
    GROUP BY queue, status, task;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION {schema}.conveyor_count_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.conveyor_count_deltas (queue, status, task, n, entered, at)
    SELECT queue, status, task, -count(*), 0, now() FROM old_rows
    GROUP BY queue, status, task;
    RETURN NULL;
END
$$;

DROP INDEX {schema}.conveyor_jobs_queue_task_status;
