-- Worker liveness (WorkerRegistry): registration, the heartbeat, isolate-self.

-- name: applied_migration_versions
-- Read once at worker start: a schema behind this TaskQ's migrations refuses the start.
SELECT version FROM {schema}.schema_migrations ORDER BY version

-- name: register_worker
-- An upsert: a restarted worker with the same id starts over (started_at = now).
INSERT INTO {schema}.workers AS w (
    worker_id, hostname, pid, queues, actors, worker_label, workgroup_instance, started_at,
    last_seen_at
)
SELECT :worker_id::text, :hostname::text, :pid::integer, :queues::text[], :actors::text[],
       :worker_label::text, :workgroup_instance::text, r.now, r.now
FROM (SELECT coalesce(:now::timestamptz, now()) AS now) AS r
ON CONFLICT (worker_id) DO UPDATE
SET hostname = EXCLUDED.hostname,
    pid = EXCLUDED.pid,
    queues = EXCLUDED.queues,
    actors = EXCLUDED.actors,
    worker_label = EXCLUDED.worker_label,
    workgroup_instance = EXCLUDED.workgroup_instance,
    started_at = EXCLUDED.started_at,
    last_seen_at = EXCLUDED.last_seen_at

-- name: heartbeat
-- One statement is one transaction: liveness, leader ping and lease extension commit together; owned rows lock in id order.
WITH req AS MATERIALIZED (
    SELECT coalesce(:now::timestamptz, now()) AS now
),
seen AS (
    UPDATE {schema}.workers w
    SET last_seen_at = (SELECT r.now FROM req r)
    WHERE w.worker_id = :worker_id::text
    RETURNING w.worker_id
),
leader AS (
    INSERT INTO {schema}.maintenance_leader AS ml (singleton, worker_id, elected_at, last_seen_at)
    SELECT true, :worker_id::text, r.now, r.now
    FROM req r
    WHERE :is_leader::boolean
    ON CONFLICT (singleton) DO UPDATE
    SET last_seen_at = EXCLUDED.last_seen_at,
        elected_at = CASE WHEN ml.worker_id = EXCLUDED.worker_id THEN ml.elected_at
                          ELSE EXCLUDED.elected_at END,
        worker_id = EXCLUDED.worker_id
    RETURNING ml.worker_id
),
owned AS (
    -- Locked, so these columns are the rows' latest versions (what the report says).
    SELECT j.id, j.fencing_token, j.cancel_phase, j.cancel_requested_at,
           j.started_at IS NOT NULL AS started
    FROM {schema}.jobs j
    WHERE j.locked_by = :worker_id::text AND j.status = 'running'
    ORDER BY j.id
    FOR UPDATE
),
extended AS (
    -- Leases the worker lets lapse (an outcome it could not write) are reported, not extended.
    UPDATE {schema}.jobs j
    SET lock_expires_at = (SELECT r.now FROM req r) + :lease::interval
    WHERE j.id = ANY (ARRAY(
        SELECT o.id FROM owned o
        WHERE NOT EXISTS (
            SELECT 1
            FROM unnest(:lapse_job_id::bigint[], :lapse_fencing_token::bigint[])
                 AS l(id, fencing_token)
            WHERE l.id = o.id AND l.fencing_token = o.fencing_token
        )
    ))
    RETURNING j.id
)
-- Always one row at least (id NULL when nothing is owned): it carries seen.
SELECT o.*, (SELECT count(*) FROM seen) AS seen, (SELECT count(*) FROM leader) AS led
FROM (SELECT 1) AS one
LEFT JOIN owned o ON true
ORDER BY o.id

-- name: deregister_worker
-- Its jobs are left alone: their leases expire and the sweep reclaims them.
DELETE FROM {schema}.workers WHERE worker_id = :worker_id::text

-- name: list_workers
-- Small table; the core sorts (Python order, not the database collation).
SELECT worker_id, hostname, pid, queues, started_at, last_seen_at, worker_label
FROM {schema}.workers

-- name: isolate_worker
-- Retryable jobs with attempts left wait again (attempt kept), the rest crash; each gets a HeartbeatLost attempt row.
WITH req AS MATERIALIZED (
    SELECT coalesce(:now::timestamptz, now()) AS now
),
owned AS (
    SELECT j.id, j.attempt, j.locked_by, j.started_at,
           (j.actor = ANY (:retryable_actors::text[])
            AND (j.max_attempts IS NULL OR j.attempt < j.max_attempts)) AS retry
    FROM {schema}.jobs j
    WHERE j.locked_by = :worker_id::text AND j.status = 'running'
    ORDER BY j.id
    FOR UPDATE
),
moved AS (
    UPDATE {schema}.jobs j
    SET status = CASE WHEN NOT o.retry THEN 'crashed'
                      WHEN j.cancel_phase >= 1 THEN 'cancelled'  -- asked to stop: not again
                      WHEN :retry_at::timestamptz <= r.now THEN 'pending'
                      ELSE 'scheduled' END,
        scheduled_at = CASE WHEN NOT o.retry OR j.cancel_phase >= 1 THEN j.scheduled_at
                            WHEN :retry_at::timestamptz <= r.now THEN r.now
                            ELSE :retry_at::timestamptz END,
        finished_at = CASE WHEN o.retry AND j.cancel_phase < 1 THEN j.finished_at
                           ELSE r.now END,
        last_error = :last_error::text,
        error_class = 'HeartbeatLost',
        locked_by = NULL,
        lock_expires_at = NULL
    FROM owned o, req r
    WHERE j.id = o.id
    RETURNING j.id
),
recorded AS (
    INSERT INTO {schema}.job_attempts (
        job_id, attempt, worker_id, started_at, finished_at, outcome, error_class, error
    )
    SELECT o.id, o.attempt, o.locked_by, o.started_at, r.now,
           CASE WHEN o.retry THEN 'heartbeat_lost' ELSE 'crashed' END,
           'HeartbeatLost', :error::text
    FROM owned o, req r
    ORDER BY o.id
    RETURNING job_id
)
SELECT m.id, (SELECT count(*) FROM recorded) AS recorded FROM moved m ORDER BY m.id
