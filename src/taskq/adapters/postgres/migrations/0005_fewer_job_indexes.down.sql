-- Reverts 0005_fewer_job_indexes: the indexes of 0001, as 0001 created them.
DROP INDEX IF EXISTS {schema}.jobs_running_idx;
CREATE INDEX jobs_running_owner_idx ON {schema}.jobs (locked_by) WHERE status = 'running';
CREATE INDEX jobs_running_lease_idx ON {schema}.jobs (lock_expires_at) WHERE status = 'running';
CREATE INDEX jobs_running_actor_idx ON {schema}.jobs (actor) WHERE status = 'running';
DROP INDEX IF EXISTS {schema}.jobs_scheduled_actor_idx;
CREATE INDEX jobs_waiting_actor_idx ON {schema}.jobs (actor)
    WHERE status IN ('pending', 'scheduled');
