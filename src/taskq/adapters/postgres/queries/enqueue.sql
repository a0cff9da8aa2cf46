-- Writing new jobs (JobEnqueuer).
--
-- A batch travels as one array per column, and its JSON columns (payload, metadata, tags)
-- as one JSON array document each: one encode on the client and one parse here instead
-- of one per job. The arrays and documents are expanded in lockstep (unnest and
-- jsonb_array_elements in the select list stream in input order, so the ascending ids
-- of one statement follow it); a column no job sets is sent as NULL and pads with NULLs.
-- JSON never travels as jsonb, so the store works whatever jsonb codec a pool has.
-- :lock_timeout (text, NULL = leave as is) is set transaction-locally before anything
-- can wait; :channel/:wake_queue send one wake-up per statement, delivered on commit
-- (:channel NULL: none; the store's WakeGate owes the queue one instead).

-- name: insert_jobs
-- Plain multi-row insert; with :check_limits it inserts nothing when a stored max_pending applies (the caller then takes the locked path).
WITH req AS MATERIALIZED (
    SELECT coalesce(:now::timestamptz, now()) AS now,
           CASE WHEN :lock_timeout::text IS NOT NULL
                THEN set_config('lock_timeout', :lock_timeout::text, true) END AS lock_timeout
),
gate AS MATERIALIZED (
    SELECT NOT :check_limits::boolean OR NOT EXISTS (
        SELECT 1 FROM {schema}.actor_config ac
        WHERE ac.actor = ANY (:limit_actors::text[]) AND ac.max_pending IS NOT NULL
    ) AS open
),
ins AS (
    INSERT INTO {schema}.jobs (
        queue, actor, payload, status, priority, max_attempts, created_at, scheduled_at,
        schedule_to_close, fairness_key, identity_key, idempotency_key, metadata, tags,
        trace_id, span_id, attempt_timeout
    )
    SELECT s.queue, s.actor, s.payload,
           CASE WHEN s.scheduled_at > (SELECT r.now FROM req r) THEN 'scheduled'
                ELSE 'pending' END,
           s.priority, s.max_attempts, (SELECT r.now FROM req r),
           CASE WHEN s.scheduled_at > (SELECT r.now FROM req r) THEN s.scheduled_at
                ELSE (SELECT r.now FROM req r) END,
           s.schedule_to_close, s.fairness_key, s.identity_key, s.idempotency_key,
           coalesce(s.metadata, '{}'::jsonb),
           CASE WHEN s.tags IS NULL OR jsonb_array_length(s.tags) = 0 THEN '{}'::text[]
                ELSE ARRAY(SELECT jsonb_array_elements_text(s.tags)) END,
           s.trace_id, s.span_id, s.attempt_timeout
    -- Set-returning functions in the select list stream in lockstep (no tuplestore to
    -- spill for big batches); a NULL array or document pads with NULLs.
    FROM (SELECT unnest(:queue::text[]) AS queue, unnest(:actor::text[]) AS actor,
                 jsonb_array_elements(:payloads::text::jsonb) AS payload,
                 unnest(:priority::integer[]) AS priority,
                 unnest(:max_attempts::integer[]) AS max_attempts,
                 unnest(:scheduled_at::timestamptz[]) AS scheduled_at,
                 unnest(:schedule_to_close::timestamptz[]) AS schedule_to_close,
                 unnest(:fairness_key::text[]) AS fairness_key,
                 unnest(:identity_key::text[]) AS identity_key,
                 unnest(:idempotency_key::text[]) AS idempotency_key,
                 jsonb_array_elements(:metadata::text::jsonb) AS metadata,
                 jsonb_array_elements(:tags::text::jsonb) AS tags,
                 unnest(:trace_id::text[]) AS trace_id, unnest(:span_id::text[]) AS span_id,
                 unnest(:attempt_timeout::interval[]) AS attempt_timeout
         ) AS s
    WHERE (SELECT g.open FROM gate g)
    RETURNING id
),
woken AS MATERIALIZED (
    SELECT pg_notify(:channel::text, :wake_queue::text)
    FROM (SELECT 1 FROM ins LIMIT 1) AS any_row
    WHERE :channel::text IS NOT NULL
)
SELECT (SELECT g.open FROM gate g) AS open,
       ARRAY(SELECT i.id FROM ins i) AS ids,
       (SELECT count(*) FROM woken) AS woken

-- name: reserve_job_ids
-- The bulk COPY path's ids (from the jobs' own sequence, ascending in input order) and its clock, or none when a stored max_pending applies (the caller then takes the locked path).
WITH gate AS MATERIALIZED (
    SELECT NOT EXISTS (
        SELECT 1 FROM {schema}.actor_config ac
        WHERE ac.actor = ANY (:limit_actors::text[]) AND ac.max_pending IS NOT NULL
    ) AS open
),
seq AS MATERIALIZED (
    SELECT pg_get_serial_sequence(:jobs_table::text, 'id')::regclass AS seq
)
SELECT (SELECT g.open FROM gate g) AS open,
       coalesce(:now::timestamptz, now()) AS now,
       ARRAY(
           SELECT nextval(s.seq)
           FROM seq s CROSS JOIN generate_series(1, :count::integer) AS n
           WHERE (SELECT g.open FROM gate g)
       ) AS ids

-- name: wake_queue
-- The one wake-up of a COPY-written batch, sent after the rows are in (inside a caller's transaction it is delivered when that commits).
SELECT pg_notify(:channel::text, :wake_queue::text) AS woken

-- name: insert_job
-- One job without keys (the common single enqueue): plain typed parameters, no arrays to expand, no CTEs; no row when a stored max_pending applies (the caller then takes the locked path).
-- The wake-up rides on RETURNING, so it goes out only when the row is written.
INSERT INTO {schema}.jobs (
    queue, actor, payload, status, priority, max_attempts, created_at, scheduled_at,
    schedule_to_close, fairness_key, metadata, tags, trace_id, span_id, attempt_timeout
)
SELECT :queue::text, :actor::text, :payload::text::jsonb,
       CASE WHEN :scheduled_at::timestamptz > coalesce(:now::timestamptz, now())
            THEN 'scheduled' ELSE 'pending' END,
       :priority::integer, :max_attempts::integer, coalesce(:now::timestamptz, now()),
       -- greatest ignores a NULL scheduled_at: due now.
       greatest(:scheduled_at::timestamptz, coalesce(:now::timestamptz, now())),
       :schedule_to_close::timestamptz, :fairness_key::text, :metadata::text::jsonb,
       :tags::text[], :trace_id::text, :span_id::text, :attempt_timeout::interval
WHERE NOT EXISTS (
    SELECT 1 FROM {schema}.actor_config ac
    WHERE ac.actor = :actor::text AND ac.max_pending IS NOT NULL
)
RETURNING id AS inserted_id,
          CASE WHEN :channel::text IS NOT NULL
               THEN pg_notify(:channel::text, :queue::text)::text END AS woken

-- name: insert_job_bare
-- insert_job for a job that sets no optional column (no schedule, deadline, timeout, fairness key, metadata, tags or trace ids) on the database clock: the rest take their column defaults, so six parameters travel instead of fourteen (a single enqueue's statement costs the client about a third less to bind, the server less to parse).
INSERT INTO {schema}.jobs (queue, actor, payload, status, priority, max_attempts)
SELECT :queue::text, :actor::text, :payload::text::jsonb, 'pending', :priority::integer,
       :max_attempts::integer
WHERE NOT EXISTS (
    SELECT 1 FROM {schema}.actor_config ac
    WHERE ac.actor = :actor::text AND ac.max_pending IS NOT NULL
)
RETURNING id AS inserted_id,
          CASE WHEN :channel::text IS NOT NULL
               THEN pg_notify(:channel::text, :queue::text)::text END AS woken

-- name: insert_job_keyed
-- One job with keys in one statement: a stored match wins; else ON CONFLICT DO NOTHING, which waits (bounded) for a racing insert and never fails.
WITH req AS MATERIALIZED (
    SELECT coalesce(:now::timestamptz, now()) AS now,
           CASE WHEN :lock_timeout::text IS NOT NULL
                THEN set_config('lock_timeout', :lock_timeout::text, true) END AS lock_timeout
),
gate AS MATERIALIZED (
    SELECT NOT EXISTS (
        SELECT 1 FROM {schema}.actor_config ac
        WHERE ac.actor = :actor::text AND ac.max_pending IS NOT NULL
    ) AS open
),
existing AS MATERIALIZED (
    -- The idempotency key matches a job in any status and is checked first; the
    -- identity key matches only a job that is still pending, scheduled or running.
    SELECT m.id
    FROM (
        SELECT j.id, 0 AS pref
        FROM {schema}.jobs j
        WHERE j.actor = :actor::text AND j.idempotency_key = :idempotency_key::text
        UNION ALL
        SELECT j.id, 1 AS pref
        FROM {schema}.jobs j
        WHERE j.actor = :actor::text AND j.identity_key = :identity_key::text
          AND j.status IN ('pending', 'scheduled', 'running')
    ) AS m
    ORDER BY m.pref
    LIMIT 1
),
ins AS (
    INSERT INTO {schema}.jobs (
        queue, actor, payload, status, priority, max_attempts, created_at, scheduled_at,
        schedule_to_close, fairness_key, identity_key, idempotency_key, metadata, tags,
        trace_id, span_id, attempt_timeout
    )
    SELECT :queue::text, :actor::text, :payload::text::jsonb,
           CASE WHEN :scheduled_at::timestamptz > r.now THEN 'scheduled' ELSE 'pending' END,
           :priority::integer, :max_attempts::integer, r.now,
           CASE WHEN :scheduled_at::timestamptz > r.now THEN :scheduled_at::timestamptz
                ELSE r.now END,
           :schedule_to_close::timestamptz, :fairness_key::text, :identity_key::text,
           :idempotency_key::text, :metadata::text::jsonb,
           CASE WHEN :tags::text IS NULL THEN '{}'::text[]
                ELSE ARRAY(SELECT jsonb_array_elements_text(:tags::text::jsonb)) END,
           :trace_id::text, :span_id::text, :attempt_timeout::interval
    FROM req r
    WHERE (SELECT g.open FROM gate g) AND NOT EXISTS (SELECT 1 FROM existing)
    ON CONFLICT DO NOTHING
    RETURNING id
),
woken AS MATERIALIZED (
    SELECT pg_notify(:channel::text, :queue::text) FROM ins WHERE :channel::text IS NOT NULL
)
SELECT (SELECT g.open FROM gate g) AS open,
       (SELECT i.id FROM ins i) AS inserted_id,
       (SELECT e.id FROM existing e) AS existing_id,
       (SELECT count(*) FROM woken) AS woken

-- name: enqueue_lookup
-- Everything the per-job rules need, read after the max_pending locks so the snapshot includes every committed rival.
WITH keyed AS (
    SELECT *
    FROM unnest(:key_actor::text[], :identity_key::text[], :idempotency_key::text[])
        AS k(actor, identity_key, idempotency_key)
)
SELECT 'idempotency' AS kind, j.actor, j.idempotency_key AS key, j.id,
       NULL::bigint AS waiting, NULL::integer AS max_pending
FROM {schema}.jobs j
JOIN (SELECT DISTINCT k.actor, k.idempotency_key FROM keyed k
      WHERE k.idempotency_key IS NOT NULL) AS ik
  ON j.actor = ik.actor AND j.idempotency_key = ik.idempotency_key
UNION ALL
SELECT 'identity', j.actor, j.identity_key, j.id, NULL, NULL
FROM {schema}.jobs j
JOIN (SELECT DISTINCT k.actor, k.identity_key FROM keyed k
      WHERE k.identity_key IS NOT NULL) AS uk
  ON j.actor = uk.actor AND j.identity_key = uk.identity_key
WHERE j.status IN ('pending', 'scheduled', 'running')
UNION ALL
SELECT 'actor', a.actor, NULL, NULL,
       -- One count per status: each reads the actor's range of a partial index
       -- (jobs_dispatch_actor_idx, jobs_scheduled_actor_idx); no index covers both.
       CASE WHEN :count_waiting::boolean THEN (
           SELECT count(*) FROM {schema}.jobs p
           WHERE p.actor = a.actor AND p.status = 'pending'
       ) + (
           SELECT count(*) FROM {schema}.jobs s
           WHERE s.actor = a.actor AND s.status = 'scheduled'
       ) END,
       ac.max_pending
FROM unnest(:actors::text[]) AS a(actor)
LEFT JOIN {schema}.actor_config ac ON ac.actor = a.actor

-- name: lock_max_pending
-- Transaction-scoped advisory locks (keys hold the schema) in the given sorted order, so batches never deadlock; lock_timeout bounds the wait.
WITH req AS MATERIALIZED (
    SELECT CASE WHEN :lock_timeout::text IS NOT NULL
                THEN set_config('lock_timeout', :lock_timeout::text, true) END AS lock_timeout
)
SELECT count(pg_advisory_xact_lock(hashtextextended(k.key, 0))) AS locked
FROM (
    SELECT u.key FROM unnest(:keys::text[]) WITH ORDINALITY AS u(key, ord)
    ORDER BY u.ord
    OFFSET 0
) AS k
-- A one-time filter: lock_timeout is set before the first lock is requested.
WHERE (SELECT count(*) FROM req) = 1

-- name: current_lock_timeout
-- Read before a bound enqueue changes lock_timeout, so the caller's transaction gets its own value back.
SELECT current_setting('lock_timeout') AS lock_timeout

-- name: set_lock_timeout
-- Transaction-local, as SET LOCAL: it never outlives the transaction it is set in.
SELECT set_config('lock_timeout', :lock_timeout::text, true) AS lock_timeout
