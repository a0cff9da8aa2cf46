-- Reverts 0006_status_domain: the table checks of 0001, and status as plain text.
ALTER TABLE {schema}.jobs
    ADD CONSTRAINT jobs_status_check CHECK (status IN (
        'pending', 'scheduled', 'running',
        'succeeded', 'failed', 'cancelled', 'abandoned', 'crashed')),
    ADD CONSTRAINT jobs_cancel_phase_check CHECK (cancel_phase BETWEEN 0 AND 3),
    ADD CONSTRAINT jobs_attempt_check CHECK (attempt >= 0),
    ADD CONSTRAINT jobs_max_attempts_check CHECK (max_attempts IS NULL OR max_attempts >= 1),
    ADD CONSTRAINT jobs_running_lock_check CHECK (
        status <> 'running' OR (locked_by IS NOT NULL AND lock_expires_at IS NOT NULL)),
    ADD CONSTRAINT jobs_terminal_finished_check CHECK (
        status NOT IN ('succeeded', 'failed', 'cancelled', 'abandoned', 'crashed')
        OR finished_at IS NOT NULL);
ALTER TABLE {schema}.jobs ALTER COLUMN status TYPE text;
ALTER TABLE {schema}.jobs_archive ALTER COLUMN status TYPE text;
DROP DOMAIN {schema}.job_status;
