-- Who wants to hear when a job reaches a final state.
CREATE TABLE conveyor_subscribers (
    job_id      INTEGER NOT NULL REFERENCES conveyor_jobs (id) ON DELETE CASCADE,
    subscriber  TEXT    NOT NULL,
    created_at  REAL    NOT NULL,
    notified_at REAL,
    PRIMARY KEY (job_id, subscriber)
) WITHOUT ROWID;

CREATE INDEX conveyor_jobs_finished ON conveyor_jobs (finished_at) WHERE finished_at IS NOT NULL;
