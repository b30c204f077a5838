-- Who wants to hear when a job reaches a final state.
CREATE TABLE {schema}.conveyor_subscribers (
    job_id      bigint      NOT NULL REFERENCES {schema}.conveyor_jobs (id) ON DELETE CASCADE,
    subscriber  text        NOT NULL,
    created_at  timestamptz NOT NULL,
    notified_at timestamptz,
    PRIMARY KEY (job_id, subscriber)
);

CREATE INDEX conveyor_jobs_finished
    ON {schema}.conveyor_jobs (finished_at) WHERE finished_at IS NOT NULL;
