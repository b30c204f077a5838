-- Three indexes served a few jobs only (those of a group, the steps of workflows, the
-- pending jobs not yet due) but held every job's status, so every claim and every
-- ending wrote an entry in each. MySQL has no partial index: each now holds a generated
-- column that is NULL outside the jobs it serves, and an index whose values do not
-- change is not written (the claim leaves two of them alone, the ending all three;
-- benchmarks/mariadb_parts.py). The other databases have partial indexes for these.
-- The queries that read them name the new columns (flow.sql, workflows.sql, claims.sql,
-- reading.sql, operator.sql).
ALTER TABLE conveyor_jobs
    ADD COLUMN group_status VARCHAR(16)
        AS (CASE WHEN job_group IS NOT NULL THEN status END) VIRTUAL,
    ADD COLUMN workflow_status VARCHAR(16)
        AS (CASE WHEN workflow_id IS NOT NULL THEN status END) VIRTUAL,
    ADD COLUMN pending_run_at DATETIME(6)
        AS (CASE WHEN status = 'pending' THEN run_at END) VIRTUAL,
    DROP INDEX conveyor_jobs_running_group,
    DROP INDEX conveyor_jobs_workflow_status,
    DROP INDEX conveyor_jobs_due,
    ADD INDEX conveyor_jobs_running_group (queue, group_status, job_group),
    ADD INDEX conveyor_jobs_workflow_status (workflow_id, workflow_status),
    ADD INDEX conveyor_jobs_due (queue, pending_run_at);
