-- One index entry fewer per pending job without a fairness key (most jobs). Migration
-- 0007's jobs_cohort_idx held every pending job, so each pending row had four entries
-- (pkey, jobs_dispatch_idx, jobs_dispatch_actor_idx, jobs_cohort_idx): about a fifth of
-- an enqueue's server work, and again for every retry or release back to pending.
--
-- Now jobs_cohort_idx holds only jobs with a fairness key (cohort other than the shared
-- '__null__'), and jobs_dispatch_idx tells the two kinds apart in its second column
-- (0: no key, 1: a key). A strict-FIFO claim reads both ranges of a queue in dispatch
-- order and merges them; a round-robin claim walks the keyed cohorts in jobs_cohort_idx
-- and reads the '__null__' cohort as the queue's range 0 of jobs_dispatch_idx.
--
-- The expressions are the domain's cohort (jobs without a key, NULL or '', share
-- '__null__', as does the key '__null__' itself). Statements must state them exactly as
-- written here for the planner to use these indexes.
--
-- jobs_dispatch_idx's predicate also says queue IS NOT NULL: always true, and proven only
-- by statements that pick a queue (queue = ...), so a statement that reads pending jobs of
-- one actor across queues (the max_pending count) is never planned as a filtered read of
-- every pending job here when statistics are stale; jobs_dispatch_actor_idx serves it.
--
-- Both indexes are rebuilt under a lock that blocks writes to jobs: run it while jobs
-- holds few pending rows, or while it is quiet.
DROP INDEX {schema}.jobs_dispatch_idx;
CREATE INDEX jobs_dispatch_idx ON {schema}.jobs (
    queue, ((coalesce(nullif(fairness_key, ''), '__null__') <> '__null__')::integer),
    priority DESC, scheduled_at, id
) WHERE status = 'pending' AND queue IS NOT NULL;

DROP INDEX {schema}.jobs_cohort_idx;
CREATE INDEX jobs_cohort_idx ON {schema}.jobs (
    queue, (coalesce(nullif(fairness_key, ''), '__null__')), priority DESC, scheduled_at, id
) WHERE status = 'pending' AND coalesce(nullif(fairness_key, ''), '__null__') <> '__null__';
