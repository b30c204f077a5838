-- The W3C trace context (traceparent, tracestate) of the code that enqueued the job, as
-- JSON, so the worker's span joins the producer's trace. NULL when nothing was traced.
-- (Migration 0009 of the SQLite and PostgreSQL schemas.)
ALTER TABLE conveyor_jobs ADD COLUMN trace_context LONGTEXT;
