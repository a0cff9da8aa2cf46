-- Jobs: the hot table, its archive, and the attempt history.
-- {schema} is the validated, quoted TASKQ_SCHEMA_NAME; the runner creates the schema.

CREATE TABLE {schema}.jobs (
    id                  bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue               text        NOT NULL,
    actor               text        NOT NULL,
    payload             jsonb       NOT NULL DEFAULT '{}'::jsonb,
    status              text        NOT NULL,
    priority            integer     NOT NULL DEFAULT 0,
    attempt             integer     NOT NULL DEFAULT 0,
    max_attempts        integer,
    fencing_token       bigint      NOT NULL DEFAULT 0,
    created_at          timestamptz NOT NULL DEFAULT now(),
    scheduled_at        timestamptz NOT NULL DEFAULT now(),
    started_at          timestamptz,
    finished_at         timestamptz,
    locked_by           text,
    lock_expires_at     timestamptz,
    cancel_phase        smallint    NOT NULL DEFAULT 0,
    cancel_requested_at timestamptz,
    schedule_to_close   timestamptz,
    fairness_key        text,
    identity_key        text,
    idempotency_key     text,
    metadata            jsonb       NOT NULL DEFAULT '{}'::jsonb,
    tags                text[]      NOT NULL DEFAULT '{}',
    result              jsonb,
    result_expires_at   timestamptz,
    last_error          text,
    error_class         text,
    trace_id            text,
    span_id             text,
    CONSTRAINT jobs_status_check CHECK (status IN (
        'pending', 'scheduled', 'running',
        'succeeded', 'failed', 'cancelled', 'abandoned', 'crashed')),
    CONSTRAINT jobs_cancel_phase_check CHECK (cancel_phase BETWEEN 0 AND 3),
    CONSTRAINT jobs_attempt_check CHECK (attempt >= 0),
    CONSTRAINT jobs_max_attempts_check CHECK (max_attempts IS NULL OR max_attempts >= 1),
    -- A running job always has an owner and a lease the sweep can expire.
    CONSTRAINT jobs_running_lock_check CHECK (
        status <> 'running' OR (locked_by IS NOT NULL AND lock_expires_at IS NOT NULL)),
    -- Prune selects terminal jobs by finished_at, so every terminal job has one.
    CONSTRAINT jobs_terminal_finished_check CHECK (
        status NOT IN ('succeeded', 'failed', 'cancelled', 'abandoned', 'crashed')
        OR finished_at IS NOT NULL)
)
-- Leave room on each page so status/lease updates are HOT (no index writes, less bloat).
WITH (fillfactor = 80);

-- Every index on the hot path is partial on status, so its size follows the number of
-- waiting/running jobs, not the number of finished rows still waiting to be pruned.

-- Claim: due pending jobs of the worker's queues in strict FIFO order.
CREATE INDEX jobs_dispatch_idx ON {schema}.jobs (queue, priority DESC, scheduled_at, id)
    WHERE status = 'pending';
-- Claim: per-actor candidate probe (LATERAL per actor with residual capacity).
CREATE INDEX jobs_dispatch_actor_idx
    ON {schema}.jobs (actor, queue, priority DESC, scheduled_at, id)
    WHERE status = 'pending';
-- Promote sweep: scheduled jobs that became due.
CREATE INDEX jobs_scheduled_idx ON {schema}.jobs (scheduled_at) WHERE status = 'scheduled';
-- Heartbeat, drain and isolate-self: a worker's running jobs.
CREATE INDEX jobs_running_owner_idx ON {schema}.jobs (locked_by) WHERE status = 'running';
-- Reclaim sweep: running jobs whose lease expired.
CREATE INDEX jobs_running_lease_idx ON {schema}.jobs (lock_expires_at) WHERE status = 'running';
-- Claim: running count per actor, for max_concurrent.
CREATE INDEX jobs_running_actor_idx ON {schema}.jobs (actor) WHERE status = 'running';
-- Enqueue: pending + scheduled count per actor, for max_pending; stranded-actor check.
CREATE INDEX jobs_waiting_actor_idx ON {schema}.jobs (actor)
    WHERE status IN ('pending', 'scheduled');
-- Enqueue: at most one live job per (actor, identity_key); a finished one frees the key.
CREATE UNIQUE INDEX jobs_identity_key_uidx ON {schema}.jobs (actor, identity_key)
    WHERE identity_key IS NOT NULL AND status IN ('pending', 'scheduled', 'running');
-- Enqueue: an idempotency key matches any stored job of the actor, whatever its status.
CREATE UNIQUE INDEX jobs_idempotency_key_uidx ON {schema}.jobs (actor, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- Deadline sweep: waiting jobs whose schedule_to_close passed.
CREATE INDEX jobs_deadline_idx ON {schema}.jobs (schedule_to_close)
    WHERE schedule_to_close IS NOT NULL AND status IN ('pending', 'scheduled');
-- Prune: terminal jobs per status (retention differs per status) by finish time.
CREATE INDEX jobs_finished_idx ON {schema}.jobs (status, finished_at)
    WHERE status IN ('succeeded', 'failed', 'cancelled', 'abandoned', 'crashed');
-- Result expiry sweep: results with a TTL.
CREATE INDEX jobs_result_expiry_idx ON {schema}.jobs (result_expires_at)
    WHERE result_expires_at IS NOT NULL;

-- Finished jobs moved out of the hot table by prune; same columns plus archive times.
CREATE TABLE {schema}.jobs_archive (
    id                  bigint      PRIMARY KEY,
    queue               text        NOT NULL,
    actor               text        NOT NULL,
    payload             jsonb       NOT NULL,
    status              text        NOT NULL,
    priority            integer     NOT NULL,
    attempt             integer     NOT NULL,
    max_attempts        integer,
    fencing_token       bigint      NOT NULL,
    created_at          timestamptz NOT NULL,
    scheduled_at        timestamptz NOT NULL,
    started_at          timestamptz,
    finished_at         timestamptz,
    locked_by           text,
    lock_expires_at     timestamptz,
    cancel_phase        smallint    NOT NULL,
    cancel_requested_at timestamptz,
    schedule_to_close   timestamptz,
    fairness_key        text,
    identity_key        text,
    idempotency_key     text,
    metadata            jsonb       NOT NULL,
    tags                text[]      NOT NULL,
    result              jsonb,
    result_expires_at   timestamptz,
    last_error          text,
    error_class         text,
    trace_id            text,
    span_id             text,
    archived_at         timestamptz NOT NULL DEFAULT now(),
    expire_at           timestamptz NOT NULL,
    CONSTRAINT jobs_archive_status_check CHECK (status IN (
        'succeeded', 'failed', 'cancelled', 'abandoned', 'crashed'))
);
-- Archive expiry sweep: rows past their expire_at.
CREATE INDEX jobs_archive_expire_idx ON {schema}.jobs_archive (expire_at);

-- One row per finished attempt. No foreign key: the history outlives the move to
-- jobs_archive, and archive expiry deletes it with the archived job.
CREATE TABLE {schema}.job_attempts (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id      bigint      NOT NULL,
    -- Not unique per job: a snooze or release refunds the attempt number.
    attempt     integer     NOT NULL,
    worker_id   text,
    started_at  timestamptz,
    finished_at timestamptz NOT NULL DEFAULT now(),
    outcome     text        NOT NULL,
    error_class text,
    error       text
);
-- A job's history in order; archive expiry deletes by job id.
CREATE INDEX job_attempts_job_idx ON {schema}.job_attempts (job_id, id);
