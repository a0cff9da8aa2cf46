-- Checks that cost every statement: Postgres rebuilds a table's CHECK expressions for
-- each statement that writes a row (about 30 µs of server time per statement here, a
-- tenth of a single enqueue), while a domain's constraint is cached per connection.
-- The status values stay enforced, by a domain; the other checks (numeric ranges, a
-- running job's lease, a terminal job's finished_at) are kept by the statements that
-- write those columns and pinned by the contract suite.
--
-- No table rewrite: the column becomes the domain before the domain has a constraint
-- (a relabel of text), and the constraint is added NOT VALID (every stored status
-- already passed jobs_status_check, dropped below). The indexes that mention status
-- are rebuilt under the lock, though: run it while jobs is small or quiet.
CREATE DOMAIN {schema}.job_status AS text;
ALTER TABLE {schema}.jobs ALTER COLUMN status TYPE {schema}.job_status;
-- The archive keeps the same column types as jobs (and its own, cold, terminal check).
ALTER TABLE {schema}.jobs_archive ALTER COLUMN status TYPE {schema}.job_status;
ALTER DOMAIN {schema}.job_status ADD CONSTRAINT job_status_check CHECK (VALUE IN (
    'pending', 'scheduled', 'running',
    'succeeded', 'failed', 'cancelled', 'abandoned', 'crashed')) NOT VALID;
ALTER TABLE {schema}.jobs
    DROP CONSTRAINT jobs_status_check,
    DROP CONSTRAINT jobs_cancel_phase_check,
    DROP CONSTRAINT jobs_attempt_check,
    DROP CONSTRAINT jobs_max_attempts_check,
    DROP CONSTRAINT jobs_running_lock_check,
    DROP CONSTRAINT jobs_terminal_finished_check;
