-- Reverts 0007_cohort_index.
DROP INDEX IF EXISTS {schema}.jobs_cohort_idx;
