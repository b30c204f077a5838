-- Counts per task and status (task_stats): a GROUP BY read in this index's order.
-- (Migration 0010 of the SQLite and PostgreSQL schemas.)
CREATE INDEX conveyor_jobs_queue_task_status ON conveyor_jobs (queue, task, status);
