-- The lease index: every claim and every heartbeat wrote it (a heartbeat changed an
-- indexed column, so it could never be a HOT update), and only the rescuer read it.
-- Running jobs are found through the status index instead; the rescuer's reads are
-- bounded by how many jobs run. Heartbeats now change no indexed column.
DROP INDEX IF EXISTS {schema}.conveyor_jobs_running_lease;
