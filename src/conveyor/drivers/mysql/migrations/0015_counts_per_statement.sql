-- Counts written per statement instead of per row: each statement that changes jobs'
-- states is followed, in its transaction, by one INSERT of the deltas it caused, summed
-- per queue, status and task (handlers.py, count_moves). The row trigger it replaces ran
-- for every row of every UPDATE (heartbeats and progress too, as MySQL has no UPDATE OF
-- a column), and its running, not its INSERT, was most of what it cost a claim and an
-- ending (benchmarks/mariadb_parts.py). Inserts and deletes keep their triggers.
DROP TRIGGER conveyor_count_changed;
