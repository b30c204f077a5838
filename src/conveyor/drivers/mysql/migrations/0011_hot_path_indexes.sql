-- The lease index: every claim, heartbeat and ending wrote it, and only the rescuer read
-- it. Running jobs are found through the status index instead; the rescuer's reads are
-- bounded by how many jobs run. (Migration 0015 of the SQLite and PostgreSQL schemas.)
DROP INDEX conveyor_jobs_running_lease ON conveyor_jobs;
