-- Reverts 0012_rr_cursor: round_robin claims restart their rotation from the first cohort.
ALTER TABLE {schema}.queues DROP COLUMN IF EXISTS rr_cursor;
