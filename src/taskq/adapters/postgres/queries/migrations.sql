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
