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
-- One statement is one transaction: liveness, leader ping and lease extension commit together.
-- It never waits for a job row another session holds locked (an application's FOR UPDATE or FOR SHARE): the report reads the rows without a lock, the extension skips the rows it cannot lock now.
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
owned AS MATERIALIZED (
    -- What the report says: every running job the worker owns as of the statement's
    -- snapshot, read without a lock (a row locked elsewhere is reported too).
    SELECT j.id, j.fencing_token, j.cancel_phase, j.cancel_requested_at,
           j.started_at IS NOT NULL AS started
    FROM {schema}.jobs j
    WHERE j.locked_by = :worker_id::text AND j.status = 'running'
),
lockable AS (
    -- The rows to extend, locked now: a row another session holds locked is skipped, not
    -- waited for, and extended by the first beat after its lock ends. A row changed since
    -- the snapshot is locked and read at its latest version, so extended checks it is
    -- still this worker's. NO KEY UPDATE: a KEY SHARE lock (a foreign key check) does not
    -- conflict with it. Leases the worker lets lapse (an outcome it could not write) are
    -- not extended.
    SELECT j.id, j.locked_by, j.status
    FROM {schema}.jobs j
    WHERE j.id = ANY (ARRAY(
        SELECT o.id FROM owned o
        WHERE NOT EXISTS (
            SELECT 1
            FROM unnest(:lapse_job_id::bigint[], :lapse_fencing_token::bigint[])
                 AS l(id, fencing_token)
            WHERE l.id = o.id AND l.fencing_token = o.fencing_token
        )
    ))
    ORDER BY j.id
    FOR NO KEY UPDATE SKIP LOCKED
),
extended AS (
    UPDATE {schema}.jobs j
    SET lock_expires_at = (SELECT r.now FROM req r) + :lease::interval
    FROM lockable k
    WHERE j.id = k.id AND k.locked_by = :worker_id::text AND k.status = 'running'
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
SELECT worker_id, hostname, pid, queues, started_at, last_seen_at, worker_label,
       workgroup_instance
FROM {schema}.workers

-- name: isolate_worker
-- Every running job of a worker that lets go of them without its consumers (isolate-self, a hard exit, a watchdog trip).
-- A row another session holds locked is skipped, not waited for: it keeps its lease, and the leader's sweep takes it back once that expired.
-- Never started: pending again, attempt refunded, no attempt row. Started: a retryable actor's job waits until retry_at with its attempt refunded (an interrupted row), any other crashes; a requested cancel ends it cancelled.
WITH req AS MATERIALIZED (
    SELECT coalesce(:now::timestamptz, now()) AS now
),
owned AS (
    SELECT j.id, j.attempt, j.locked_by, j.started_at,
           j.started_at IS NULL AS unstarted,
           j.actor = ANY (:retryable_actors::text[]) AS retry
    FROM {schema}.jobs j
    WHERE j.locked_by = :worker_id::text AND j.status = 'running'
    ORDER BY j.id
    FOR NO KEY UPDATE SKIP LOCKED
),
moved AS (
    UPDATE {schema}.jobs j
    SET status = CASE WHEN j.cancel_phase >= 1 THEN 'cancelled'  -- asked to stop: not again
                      WHEN o.unstarted THEN 'pending'
                      WHEN NOT o.retry THEN 'crashed'
                      WHEN :retry_at::timestamptz <= r.now THEN 'pending'
                      ELSE 'scheduled' END,
        scheduled_at = CASE WHEN j.cancel_phase >= 1 OR o.unstarted OR NOT o.retry
                                THEN j.scheduled_at
                            WHEN :retry_at::timestamptz <= r.now THEN r.now
                            ELSE :retry_at::timestamptz END,
        finished_at = CASE WHEN j.cancel_phase >= 1 OR NOT (o.unstarted OR o.retry) THEN r.now
                           ELSE j.finished_at END,
        attempt = CASE WHEN o.unstarted OR o.retry THEN greatest(j.attempt - 1, 0)
                       ELSE j.attempt END,
        last_error = CASE WHEN o.unstarted THEN j.last_error ELSE :last_error::text END,
        error_class = CASE WHEN o.unstarted THEN j.error_class ELSE :error_class::text END,
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
           CASE WHEN o.retry THEN 'interrupted' ELSE 'crashed' END,
           :error_class::text, :error::text
    FROM owned o, req r
    WHERE NOT o.unstarted
    ORDER BY o.id
    RETURNING job_id
)
SELECT m.id, (SELECT count(*) FROM recorded) AS recorded FROM moved m ORDER BY m.id
