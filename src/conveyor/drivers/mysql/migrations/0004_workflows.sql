-- Workflows: jobs enqueued together as the steps of one run. A run is a row here (a
-- label for people); its steps are ordinary jobs that name the run and their step.
-- What a run is doing (running, completed, failed, cancelled) is read from its steps.
-- (Migration 0008 of the SQLite and PostgreSQL schemas.)
CREATE TABLE conveyor_workflows (
    id         BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    label      VARCHAR(200) NOT NULL,
    created_at DATETIME(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = {collation};

-- A step's name is unique in its run (NULLs never collide: jobs outside a run); the
-- run's steps are read and counted by status.
ALTER TABLE conveyor_jobs
    ADD COLUMN workflow_id BIGINT,
    ADD COLUMN step VARCHAR(200),
    ADD UNIQUE INDEX conveyor_jobs_workflow_step (workflow_id, step),
    ADD INDEX conveyor_jobs_workflow_status (workflow_id, status);
