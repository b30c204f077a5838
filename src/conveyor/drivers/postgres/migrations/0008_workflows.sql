-- Workflows: jobs enqueued together as the steps of one run. A run is a row here (a
-- label for people); its steps are ordinary jobs that name the run and their step.
-- What a run is doing (running, completed, failed, cancelled) is read from its steps.
CREATE TABLE {schema}.conveyor_workflows (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    label      text        NOT NULL,
    created_at timestamptz NOT NULL
);

ALTER TABLE {schema}.conveyor_jobs ADD COLUMN workflow_id bigint;
ALTER TABLE {schema}.conveyor_jobs ADD COLUMN step text;

-- A step's name is unique in its run; the run's steps are read and counted by status.
CREATE UNIQUE INDEX conveyor_jobs_workflow_step
    ON {schema}.conveyor_jobs (workflow_id, step)
    WHERE workflow_id IS NOT NULL;
CREATE INDEX conveyor_jobs_workflow_status
    ON {schema}.conveyor_jobs (workflow_id, status)
    WHERE workflow_id IS NOT NULL;
