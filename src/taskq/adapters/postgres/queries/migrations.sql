-- Bookkeeping of `taskq migrate`: the migration lock and the schema_migrations table.

-- name: lock_migrations
-- Session lock, keyed by schema: concurrent `migrate` runs on one schema take turns, other schemas never wait.
SELECT pg_advisory_lock(hashtextextended(:lock_key::text, 0))

-- name: unlock_migrations
-- Released explicitly so a pooled connection never keeps it; closing the session would too.
SELECT pg_advisory_unlock(hashtextextended(:lock_key::text, 0))

-- name: schema_exists
-- Checked first: CREATE SCHEMA needs CREATE on the database even when the schema exists.
SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = :schema_name)

-- name: create_schema
-- IF NOT EXISTS as a second guard; it runs under the migration lock, so it never races.
CREATE SCHEMA IF NOT EXISTS {schema}

-- name: create_migrations_table
-- The runner owns this table (it must exist before the first migration is read).
CREATE TABLE IF NOT EXISTS {schema}.schema_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)

-- name: migrations_table_exists
-- Lets `status` read a schema that was never migrated without creating anything.
SELECT EXISTS (
    SELECT 1 FROM pg_catalog.pg_tables
    WHERE schemaname = :schema_name AND tablename = 'schema_migrations'
)

-- name: applied_migrations
-- Read inside the lock, so the plan sees every migration a concurrent run committed.
SELECT version, name, checksum, applied_at FROM {schema}.schema_migrations ORDER BY version

-- name: record_migration
-- Runs in the migration's own transaction: the row exists if and only if the migration committed.
INSERT INTO {schema}.schema_migrations (version, name, checksum) VALUES (:version, :name, :checksum)

-- name: forget_migration
-- Runs in the down migration's transaction, for the same reason as record_migration.
DELETE FROM {schema}.schema_migrations WHERE version = :version

-- name: drop_schema
-- Test teardown and full removal: CASCADE takes every TaskQ table with it.
DROP SCHEMA IF EXISTS {schema} CASCADE

-- name: set_migration_lock_timeout
-- First in each migration's transaction, and local to it: a DDL lock wait behind a long transaction fails instead of queueing every writer of the table behind it; the advisory lock above is outside and still waits.
SELECT set_config('lock_timeout', :lock_timeout::text, true)

-- name: lock_holders
-- After a migration's lock wait timed out (best effort, for the error message): the other sessions holding locks on this schema's tables, oldest transaction first.
SELECT l.pid,
       a.state,
       extract(epoch FROM now() - a.xact_start)::bigint AS xact_seconds,
       string_agg(DISTINCT c.relname::text, ', ' ORDER BY c.relname::text) AS tables
FROM pg_catalog.pg_locks AS l
JOIN pg_catalog.pg_class AS c ON c.oid = l.relation
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
LEFT JOIN pg_catalog.pg_stat_activity AS a ON a.pid = l.pid
WHERE n.nspname = :schema_name AND c.relkind IN ('r', 'p') AND l.granted
  AND l.pid <> pg_backend_pid()
GROUP BY l.pid, a.state, a.xact_start
ORDER BY a.xact_start NULLS LAST
LIMIT 5
