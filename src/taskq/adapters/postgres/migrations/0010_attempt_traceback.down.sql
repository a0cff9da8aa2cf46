-- Reverts 0010_attempt_traceback: the stored tracebacks are dropped with their column.
ALTER TABLE {schema}.job_attempts DROP COLUMN IF EXISTS traceback;
