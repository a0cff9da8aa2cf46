-- Queue dispatch modes (QueueAdmin). A queue without a row is strict_fifo.

-- name: set_queue_mode
-- Upsert: setting a mode again replaces it; the claim re-reads modes every time.
INSERT INTO {schema}.queues AS q (name, mode, updated_at)
VALUES (:queue::text, :mode::text, now())
ON CONFLICT (name) DO UPDATE SET mode = EXCLUDED.mode, updated_at = EXCLUDED.updated_at

-- name: queue_modes
-- Small table; the core sorts.
SELECT q.name, q.mode FROM {schema}.queues q
