-- PostgreSQL drops the dependency edges' foreign keys in this version (their per-row
-- checks were most of a large workflow's write time there). MySQL keeps them. Nothing
-- changes here.
SELECT 1;
