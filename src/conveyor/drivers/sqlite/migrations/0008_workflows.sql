-- Workflows: jobs enqueued together as the steps of one run. A run is a row here (a
-- label for people); its steps are ordinary jobs that name the run and their step.
-- What a run is doing (running, completed, failed, cancelled) is read from its steps.
CREATE TABLE conveyor_workflows (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    label      TEXT    NOT NULL,
    created_at REAL    NOT NULL
);

ALTER TABLE conveyor_jobs ADD COLUMN workflow_id INTEGER;
ALTER TABLE conveyor_jobs ADD COLUMN step TEXT;

-- A step's name is unique in its run; the run's steps are read and counted by status.
CREATE UNIQUE INDEX conveyor_jobs_workflow_step
    ON conveyor_jobs (workflow_id, step)
    WHERE workflow_id IS NOT NULL;
CREATE INDEX conveyor_jobs_workflow_status
    ON conveyor_jobs (workflow_id, status)
    WHERE workflow_id IS NOT NULL;
