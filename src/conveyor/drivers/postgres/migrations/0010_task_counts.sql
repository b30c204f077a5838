-- Counts per task and status (task_stats): a GROUP BY read in this index's order,
-- from the index alone where the visibility map allows.
CREATE INDEX conveyor_jobs_queue_task_status
    ON {schema}.conveyor_jobs (queue, task, status);
