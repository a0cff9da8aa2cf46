-- Reverts 0009_unkeyed_dispatch: the dispatch and cohort indexes of migrations 0001 and 0007.
DROP INDEX IF EXISTS {schema}.jobs_dispatch_idx;
CREATE INDEX jobs_dispatch_idx ON {schema}.jobs (queue, priority DESC, scheduled_at, id)
    WHERE status = 'pending';

DROP INDEX IF EXISTS {schema}.jobs_cohort_idx;
CREATE INDEX jobs_cohort_idx ON {schema}.jobs (
    queue, (coalesce(nullif(fairness_key, ''), '__null__')), priority DESC, scheduled_at, id
) WHERE status = 'pending' AND coalesce(nullif(fairness_key, ''), '__null__') IS NOT NULL;
