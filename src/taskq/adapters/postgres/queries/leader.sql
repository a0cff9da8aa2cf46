-- The maintenance-leader lock: a session advisory lock on a dedicated connection.
-- The key text is Schema.lock_key("maintenance_leader"), so each schema has its own leader.
-- An advisory lock on a bigint shows in pg_locks as classid = high 32 bits,
-- objid = low 32 bits, objsubid = 1.

-- name: try_acquire_leader
-- Checks our own hold first: session locks are re-entrant, and a second grant would need a second unlock.
SELECT CASE
    WHEN EXISTS (
        SELECT 1
        FROM pg_catalog.pg_locks AS l
        WHERE l.locktype = 'advisory'
          AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())
          AND l.classid = ((hashtextextended(:lock_key::text, 0) >> 32) & 4294967295)::oid
          AND l.objid = (hashtextextended(:lock_key::text, 0) & 4294967295)::oid
          AND l.objsubid = 1
          AND l.mode = 'ExclusiveLock'
          AND l.granted
          AND l.pid = pg_backend_pid()
    ) THEN true
    ELSE pg_try_advisory_lock(hashtextextended(:lock_key::text, 0))
END AS held

-- name: probe_leader
-- Reads pg_locks rather than SELECT 1: proves this very session still holds the lock, not just that it answers.
SELECT EXISTS (
    SELECT 1
    FROM pg_catalog.pg_locks AS l
    WHERE l.locktype = 'advisory'
      AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())
      AND l.classid = ((hashtextextended(:lock_key::text, 0) >> 32) & 4294967295)::oid
      AND l.objid = (hashtextextended(:lock_key::text, 0) & 4294967295)::oid
      AND l.objsubid = 1
      AND l.mode = 'ExclusiveLock'
      AND l.granted
      AND l.pid = pg_backend_pid()
) AS held

-- name: release_leader
-- Unlocks only a lock this session holds, so it never raises the server's "you don't own a lock" warning.
SELECT CASE
    WHEN EXISTS (
        SELECT 1
        FROM pg_catalog.pg_locks AS l
        WHERE l.locktype = 'advisory'
          AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())
          AND l.classid = ((hashtextextended(:lock_key::text, 0) >> 32) & 4294967295)::oid
          AND l.objid = (hashtextextended(:lock_key::text, 0) & 4294967295)::oid
          AND l.objsubid = 1
          AND l.mode = 'ExclusiveLock'
          AND l.granted
          AND l.pid = pg_backend_pid()
    ) THEN pg_advisory_unlock(hashtextextended(:lock_key::text, 0))
    ELSE false
END AS released
