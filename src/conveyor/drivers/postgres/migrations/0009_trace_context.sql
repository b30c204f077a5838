-- The W3C trace context (traceparent, tracestate) of the code that enqueued the job, as
-- JSON, so the worker's span joins the producer's trace. NULL when nothing was traced.
ALTER TABLE {schema}.conveyor_jobs ADD COLUMN trace_context text;
