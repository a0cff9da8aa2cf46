-- Fewer index entries per job: a pending row had 4 (pkey, two dispatch indexes and
-- jobs_waiting_actor_idx), a running row 4 (pkey and three status = 'running' indexes),
-- and every status change writes all of them again (status is in every predicate, so
-- those updates are never HOT). Now a pending row gets 3 and a running row 2.

-- Waiting jobs per actor (max_pending counts, stranded actors): the pending part is read
-- from jobs_dispatch_actor_idx (it leads with actor), the scheduled part from this one.
DROP INDEX {schema}.jobs_waiting_actor_idx;
CREATE INDEX jobs_scheduled_actor_idx ON {schema}.jobs (actor) WHERE status = 'scheduled';

-- One index for running jobs: a worker's jobs (heartbeat, drain, isolate-self) by
-- locked_by; an actor's running count (max_concurrent) by the actor key column, read
-- in the index without visiting other rows; the reclaim sweep reads it whole. Running
-- rows are bounded by the workers' concurrency. No index holds lock_expires_at, so a
-- heartbeat's lease extension is a HOT update.
DROP INDEX {schema}.jobs_running_owner_idx;
DROP INDEX {schema}.jobs_running_lease_idx;
DROP INDEX {schema}.jobs_running_actor_idx;
CREATE INDEX jobs_running_idx ON {schema}.jobs (locked_by, actor) WHERE status = 'running';
