-- Reverts 0011_attempt_timeout: the jobs' own timeouts are dropped with their column (their
-- actors' timeouts still apply).
ALTER TABLE {schema}.jobs_archive DROP COLUMN IF EXISTS attempt_timeout;
ALTER TABLE {schema}.jobs DROP COLUMN IF EXISTS attempt_timeout;
