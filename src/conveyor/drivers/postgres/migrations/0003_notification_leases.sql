-- A dispatcher takes a subscriber's notification for a while before telling it, so two
-- dispatchers never tell the same subscriber of the same finish at once.
ALTER TABLE {schema}.conveyor_subscribers ADD COLUMN notifying_until timestamptz;
