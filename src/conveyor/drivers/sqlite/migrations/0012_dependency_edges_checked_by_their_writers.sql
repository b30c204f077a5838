-- PostgreSQL drops the dependency edges' foreign keys in this version (their per-row
-- checks were most of a large workflow's write time there). SQLite keeps them: its
-- checks are in-process index lookups. Nothing changes here; the number keeps the
-- dialects' schema versions in step.
SELECT 1;
