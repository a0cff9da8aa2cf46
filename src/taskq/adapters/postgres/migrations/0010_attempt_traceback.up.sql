-- A failed attempt keeps its traceback (size-bounded by the worker, no local variables),
-- read back by JobsClient.attempts. Only job_attempts gets it: a succeeded attempt, the
-- one that job rows record alone (migration 0008), has no traceback.
--
-- Adding a nullable column without a default rewrites nothing.
ALTER TABLE {schema}.job_attempts ADD COLUMN traceback text;
