-- Stored per-actor configuration (ActorConfigAdmin).

-- name: lock_actor_config
-- Concurrent startup syncs take turns (transaction-scoped, keyed by schema), so each row is created once.
SELECT pg_advisory_xact_lock(hashtextextended(:lock_key::text, 0)) AS locked

-- name: actor_configs
-- NULL actors lists every row; the core sorts.
SELECT ac.actor, ac.queue, ac.metadata::text AS metadata, ac.max_concurrent, ac.max_pending,
       ac.result_ttl
FROM {schema}.actor_config ac
WHERE :actors::text[] IS NULL OR ac.actor = ANY (:actors::text[])

-- name: insert_actor_configs
-- Rows the sync creates, seeded from the registered literals; capacity is never written again by a sync.
INSERT INTO {schema}.actor_config (
    actor, queue, metadata, max_concurrent, max_pending, result_ttl, updated_at
)
SELECT s.actor, s.queue, s.metadata::jsonb, s.max_concurrent, s.max_pending, s.result_ttl, now()
FROM unnest(
    :actor::text[], :queue::text[], :metadata::text[], :max_concurrent::integer[],
    :max_pending::integer[], :result_ttl::interval[]
) AS s(actor, queue, metadata, max_concurrent, max_pending, result_ttl)

-- name: overwrite_actor_structure
-- A forced sync rewrites only the structural fields (queue, metadata).
UPDATE {schema}.actor_config ac
SET queue = s.queue, metadata = s.metadata::jsonb, updated_at = now()
FROM unnest(:actor::text[], :queue::text[], :metadata::text[]) AS s(actor, queue, metadata)
WHERE ac.actor = s.actor

-- name: set_actor_capacity
-- Named fields are written, cleared ones set NULL, the rest kept; the next claim, enqueue or finish reads the change.
UPDATE {schema}.actor_config ac
SET max_concurrent = CASE WHEN :clear_max_concurrent::boolean THEN NULL
                          ELSE coalesce(:max_concurrent::integer, ac.max_concurrent) END,
    max_pending = CASE WHEN :clear_max_pending::boolean THEN NULL
                       ELSE coalesce(:max_pending::integer, ac.max_pending) END,
    result_ttl = CASE WHEN :clear_result_ttl::boolean THEN NULL
                      ELSE coalesce(:result_ttl::interval, ac.result_ttl) END,
    updated_at = now()
WHERE ac.actor = :actor::text
RETURNING ac.actor, ac.queue, ac.metadata::text AS metadata, ac.max_concurrent,
          ac.max_pending, ac.result_ttl
