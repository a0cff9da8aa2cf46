-- Round-robin dispatch without reading a whole queue: claim_mixed ranked every due job
-- of a round_robin queue in its fairness cohort, so a claim cost grew with the backlog
-- (158 ms per claim at 100,000 pending jobs here). With the jobs of each (queue, cohort)
-- in dispatch order, it walks the cohorts (one index probe each) and reads at most
-- :limit jobs of each. The cohort expression is the domain's: jobs without a key (NULL
-- or '') share '__null__'.
--
-- Its predicate's second term is always true, and no other statement can prove it: only
-- statements that state it (or compare the cohort expression) may use this index, so
-- the planner never picks it to scan all pending jobs for a statement that filters on
-- something else (as it did for enqueue_lookup when jobs had stale statistics).
--
-- One more index entry per pending job (pending rows had three). Built under a lock
-- that blocks writes to jobs: run it while jobs is small or quiet.
CREATE INDEX jobs_cohort_idx ON {schema}.jobs (
    queue, (coalesce(nullif(fairness_key, ''), '__null__')), priority DESC, scheduled_at, id
) WHERE status = 'pending' AND coalesce(nullif(fairness_key, ''), '__null__') IS NOT NULL;
