-- Claiming due work (JobClaimer): the dispatch claim (with the terminal writes that ride
-- along with it), start marks, release, drain.
--
-- A claim computes exactly taskq.domain.dispatch.select_for_dispatch.
-- claim_fifo, the common case (only strict_fifo queues, no capped actor): per requested
-- queue two index scans of jobs_dispatch_idx in dispatch order with LIMIT (its range 0,
-- jobs without a fairness key, and range 1, jobs with one: migration 0009), locked with
-- SKIP LOCKED, merged. The actor filter is written array_position(...) IS NOT NULL on
-- purpose: no index can serve it and the planner assumes it passes almost every row, so
-- even stale statistics never lure it onto an actor index plus a sort of the whole
-- queue; the ordered scan with LIMIT stays the cheapest plan. claim_fifo reads the queue
-- modes and capped actors itself and claims nothing when either applies; then claim_mixed
-- runs, on a bounded candidate set that provably holds everything the model can take:
--   (a) uncapped actors: per requested strict_fifo queue its top :limit jobs of each range
--       (their union holds the top :limit of the one strict_fifo cohort); on round_robin
--       queues up to :limit due jobs of each cohort, the keyed cohorts walked in
--       jobs_cohort_idx and the '__null__' one read as range 0 of jobs_dispatch_idx;
--   (b) each capped actor: its top residual jobs in FIFO order (stage 1, exactly);
-- then stage 2 with window functions: round = rank in cohort, ordered by
-- (round, wrapped, cohort, priority desc, scheduled_at, id), LIMIT :limit, where wrapped
-- says the cohort is not after its queue's rotation cursor (queues.rr_cursor, migration
-- 0012), which the claim then moves to the last cohort it took there. A cohort's top
-- :limit eligible jobs are all in the set, so every round below :limit is the model's
-- round.
--
-- max_concurrent under concurrency: a claim that may take a capped actor's jobs first
-- rewrites that actor's actor_config row, only if the row is still the version its
-- snapshot counted running jobs under (xmin). Claims of one capped actor thereby
-- serialise, and a claim whose snapshot predates another claim's commit finds the
-- newer version, takes none of that actor's jobs this time, and never overshoots.

-- name: claim_fifo
-- Small on purpose (cheap to plan every time): one index scan per queue; the first row says whether the claim was simple enough for it.
WITH req AS MATERIALIZED (
    SELECT coalesce(:now::timestamptz, now()) AS now
),
simple AS MATERIALIZED (
    -- Re-read on every claim: a capped actor or a round_robin queue needs claim_mixed.
    SELECT NOT EXISTS (
               SELECT 1 FROM {schema}.actor_config ac
               WHERE ac.actor = ANY (:actors::text[]) AND ac.max_concurrent IS NOT NULL
           )
       AND NOT EXISTS (
               SELECT 1 FROM {schema}.queues qm
               WHERE qm.name = ANY (:queues::text[]) AND qm.mode = 'round_robin'
           ) AS yes
),
picked AS MATERIALIZED (
    SELECT c.id, row_number() OVER (ORDER BY c.priority DESC, c.scheduled_at, c.id) AS ord
    FROM unnest(:queues::text[]) AS q(name)
    CROSS JOIN (VALUES (0), (1)) AS k(keyed)
    CROSS JOIN LATERAL (
        SELECT j.id, j.priority, j.scheduled_at
        FROM {schema}.jobs j
        WHERE j.status = 'pending'
          AND j.queue = q.name
          AND (coalesce(nullif(j.fairness_key, ''), '__null__') <> '__null__')::integer = k.keyed
          AND array_position(:actors::text[], j.actor) IS NOT NULL
          AND j.scheduled_at <= (SELECT r.now FROM req r)
        ORDER BY j.priority DESC, j.scheduled_at, j.id
        LIMIT :limit
        FOR UPDATE OF j SKIP LOCKED
    ) AS c
    WHERE (SELECT s.yes FROM simple s)
    ORDER BY c.priority DESC, c.scheduled_at, c.id
    LIMIT :limit
),
claimed AS (
    -- = ANY (ARRAY(...)): at most :limit primary-key probes, whatever the estimates say.
    UPDATE {schema}.jobs j
    SET status = 'running',
        locked_by = :worker_id::text,
        lock_expires_at = (SELECT r.now FROM req r) + :lease::interval,
        fencing_token = j.fencing_token + 1,
        attempt = j.attempt + 1,
        -- Started only where a consumer waits for it (:start_now, in dispatch order);
        -- the rest run after a start mark, so an empty started_at means never run.
        started_at = CASE WHEN j.id = ANY (ARRAY(
                             SELECT p.id FROM picked p WHERE p.ord <= :start_now::bigint))
                         THEN (SELECT r.now FROM req r) END
    WHERE j.id = ANY (ARRAY(SELECT p.id FROM picked p))
    -- Times outside years 1..9999 (written by other means) are clamped into them: no
    -- driver can load them, and one such row must not fail the whole claim.
    RETURNING j.id, j.queue, j.actor, j.payload::text AS payload, j.priority, j.attempt,
              j.max_attempts, j.fencing_token,
              LEAST(GREATEST(j.scheduled_at, '0001-01-01 00:00:00+00'),
                    '9999-12-31 23:59:59+00') AS scheduled_at,
              j.lock_expires_at,
              CASE WHEN j.schedule_to_close IS NOT NULL  -- GREATEST would turn NULL into 0001
                   THEN LEAST(GREATEST(j.schedule_to_close, '0001-01-01 00:00:00+00'),
                              '9999-12-31 23:59:59+00') END AS schedule_to_close,
              j.fairness_key, j.metadata::text AS metadata, j.trace_id, j.span_id,
              j.started_at IS NOT NULL AS started, j.attempt_timeout
)
SELECT s.yes AS simple, cl.*
FROM simple s
LEFT JOIN (claimed cl JOIN picked p ON p.id = cl.id) ON true
ORDER BY p.ord

-- name: finish_and_claim
-- Terminal writes for many leases (possibly none), then claim_fifo for a worker on one queue (possibly nothing: :limit 0): one statement, one commit per round; the constant bound keeps its plan generic.
WITH src AS (
    SELECT *
    FROM unnest(
        :job_id::bigint[], :fencing_token::bigint[], :status::text[], :result::text[],
        :error::text[], :error_class::text[], :result_ttl::interval[], :finished_now::timestamptz[],
        :started_ago::interval[], :traceback::text[]
    ) AS s(job_id, fencing_token, status, result, error, error_class, result_ttl, now,
           started_ago, traceback)
),
locked AS (
    -- By primary key only, then checked: a status test here would let the planner scan a
    -- partial index full of finished jobs' dead entries instead of probing the ids.
    SELECT j.id, j.actor, j.attempt, j.locked_by, j.started_at, j.status, j.fencing_token
    FROM {schema}.jobs j
    WHERE j.id = ANY (:job_id::bigint[])
    ORDER BY j.id
    FOR UPDATE OF j
),
owned AS (
    -- An unmarked start (the worker skips the mark for short jobs) began started_ago ago.
    SELECT l.id, l.actor, l.attempt, l.locked_by,
           coalesce(l.started_at, coalesce(s.now, now()) - s.started_ago) AS started_at,
           s.status, s.result, s.error, s.error_class, s.traceback, s.result_ttl,
           coalesce(s.now, now()) AS now
    FROM locked l
    JOIN src s ON s.job_id = l.id AND s.fencing_token = l.fencing_token
    WHERE l.status = 'running'
),
done AS (
    UPDATE {schema}.jobs j
    SET status = o.status,
        started_at = o.started_at,
        finished_at = o.now,
        result = o.result::jsonb,
        result_expires_at = o.now + coalesce(ac.result_ttl, o.result_ttl),
        -- A success clears an earlier attempt's error (job_attempts keeps it).
        last_error = CASE WHEN o.status = 'succeeded' THEN NULL
                          WHEN o.error IS NOT NULL THEN o.error
                          WHEN o.error_class IS NOT NULL THEN o.error_class
                          ELSE j.last_error END,
        error_class = CASE WHEN o.status = 'succeeded' THEN NULL
                           WHEN o.error IS NOT NULL OR o.error_class IS NOT NULL
                           THEN o.error_class ELSE j.error_class END,
        locked_by = NULL,
        lock_expires_at = NULL,
        finished_by = o.locked_by
    FROM owned o
    LEFT JOIN {schema}.actor_config ac ON ac.actor = o.actor
    WHERE j.id = o.id
    RETURNING j.id, j.fencing_token
),
recorded AS (
    -- Attempt rows take worker_id and started_at from the row as it was before the write.
    -- A succeeded attempt has none: the job row records it (finished_by, migration 0008).
    INSERT INTO {schema}.job_attempts (
        job_id, attempt, worker_id, started_at, finished_at, outcome, error_class, error,
        traceback
    )
    SELECT o.id, o.attempt, o.locked_by, o.started_at, o.now, o.status, o.error_class, o.error,
           o.traceback
    FROM owned o
    WHERE o.status <> 'succeeded'
    ORDER BY o.id
    RETURNING job_id
),
req AS MATERIALIZED (
    SELECT coalesce(:now::timestamptz, now()) AS now
),
simple AS MATERIALIZED (
    -- Re-read on every claim: a capped actor or a round_robin queue needs claim_mixed.
    SELECT NOT EXISTS (
               SELECT 1 FROM {schema}.actor_config ac
               WHERE ac.actor = ANY (:actors::text[]) AND ac.max_concurrent IS NOT NULL
           )
       AND NOT EXISTS (
               SELECT 1 FROM {schema}.queues qm
               WHERE qm.name = :queue::text AND qm.mode = 'round_robin'
           ) AS yes
),
picked AS MATERIALIZED (
    SELECT c.id, row_number() OVER (ORDER BY c.priority DESC, c.scheduled_at, c.id) AS ord
    FROM (
        -- Both ranges of the queue in jobs_dispatch_idx (0: no fairness key, 1: a key),
        -- merged; the range a queue does not use costs one empty probe.
        SELECT r.id, r.priority, r.scheduled_at
        FROM (VALUES (0), (1)) AS k(keyed)
        CROSS JOIN LATERAL (
            SELECT l.id, l.priority, l.scheduled_at
            FROM (
                SELECT j.id, j.priority, j.scheduled_at
                FROM {schema}.jobs j
                WHERE j.status = 'pending'
                  AND j.queue = :queue::text
                  AND (coalesce(nullif(j.fairness_key, ''), '__null__') <> '__null__')::integer = k.keyed
                  AND array_position(:actors::text[], j.actor) IS NOT NULL
                  AND j.scheduled_at <= (SELECT r.now FROM req r)
                ORDER BY j.priority DESC, j.scheduled_at, j.id
                -- A constant bound under the :limit one: a generic plan then costs what a
                -- custom one does (a parameter LIMIT alone is estimated at 10% of the
                -- queue), so the prepared claim is planned once, not on every call. The
                -- store never asks for more than CLAIM_BATCH_MAX (= this bound) rows.
                LIMIT 128
                FOR UPDATE OF j SKIP LOCKED
            ) AS l
            -- Right on the locking scan, with no sort in between (a sort would pull, and
            -- lock, all 128): rows arrive in index order and only the ones taken are
            -- locked (a queue holding both kinds locks at most :limit more, until commit).
            LIMIT :limit
        ) AS r
        ORDER BY r.priority DESC, r.scheduled_at, r.id
        LIMIT :limit
    ) AS c
    WHERE (SELECT s.yes FROM simple s)
),
claimed AS (
    -- = ANY (ARRAY(...)): at most :limit primary-key probes, whatever the estimates say.
    UPDATE {schema}.jobs j
    SET status = 'running',
        locked_by = :worker_id::text,
        lock_expires_at = (SELECT r.now FROM req r) + :lease::interval,
        fencing_token = j.fencing_token + 1,
        attempt = j.attempt + 1,
        -- Started only where a consumer waits for it (:start_now, in dispatch order);
        -- the rest run after a start mark, so an empty started_at means never run.
        started_at = CASE WHEN j.id = ANY (ARRAY(
                             SELECT p.id FROM picked p WHERE p.ord <= :start_now::bigint))
                         THEN (SELECT r.now FROM req r) END
    WHERE j.id = ANY (ARRAY(SELECT p.id FROM picked p))
    -- Times outside years 1..9999 (written by other means) are clamped into them: no
    -- driver can load them, and one such row must not fail the whole claim.
    RETURNING j.id, j.queue, j.actor, j.payload::text AS payload, j.priority, j.attempt,
              j.max_attempts, j.fencing_token,
              LEAST(GREATEST(j.scheduled_at, '0001-01-01 00:00:00+00'),
                    '9999-12-31 23:59:59+00') AS scheduled_at,
              j.lock_expires_at,
              CASE WHEN j.schedule_to_close IS NOT NULL  -- GREATEST would turn NULL into 0001
                   THEN LEAST(GREATEST(j.schedule_to_close, '0001-01-01 00:00:00+00'),
                              '9999-12-31 23:59:59+00') END AS schedule_to_close,
              j.fairness_key, j.metadata::text AS metadata, j.trace_id, j.span_id,
              j.started_at IS NOT NULL AS started, j.attempt_timeout
)
-- Every row carries the written leases (the first row always exists: the simple flag).
SELECT s.yes AS simple,
       ARRAY(SELECT d.id FROM done d) AS finished_ids,
       ARRAY(SELECT d.fencing_token FROM done d) AS finished_tokens,
       cl.*
FROM simple s
LEFT JOIN (claimed cl JOIN picked p ON p.id = cl.id) ON true
ORDER BY p.ord

-- name: claim_mixed
-- The exact model when a round_robin queue or a capped actor is involved (bounded by :limit or a residual; round-robin reads :limit per cohort); the first row says whether claim_fifo would now do.
WITH RECURSIVE req AS MATERIALIZED (
    SELECT coalesce(:now::timestamptz, now()) AS now
),
cfg AS MATERIALIZED (
    -- Capped requested actors, re-read on every claim; xmin is the row version counted under.
    SELECT ac.actor, ac.max_concurrent, ac.xmin AS version
    FROM {schema}.actor_config ac
    WHERE ac.actor = ANY (:actors::text[]) AND ac.max_concurrent IS NOT NULL
),
rr AS MATERIALIZED (
    -- Requested round_robin queues, re-read on every claim; a queue without a row is strict_fifo.
    SELECT qm.name, qm.rr_cursor
    FROM {schema}.queues qm
    WHERE qm.name = ANY (:queues::text[]) AND qm.mode = 'round_robin'
),
running AS MATERIALIZED (
    SELECT cf.actor, cf.version,
           greatest(cf.max_concurrent - (
               SELECT count(*) FROM {schema}.jobs rj
               WHERE rj.status = 'running' AND rj.actor = cf.actor
           ), 0) AS residual
    FROM cfg cf
),
bumped AS (
    UPDATE {schema}.actor_config ac
    SET max_concurrent = ac.max_concurrent
    FROM running rn
    WHERE ac.actor = rn.actor AND rn.residual > 0 AND ac.xmin = rn.version
    RETURNING ac.actor
),
caps AS MATERIALIZED (
    SELECT rn.actor,
           CASE WHEN EXISTS (SELECT 1 FROM bumped b WHERE b.actor = rn.actor)
                THEN rn.residual ELSE 0 END AS residual
    FROM running rn
),
fifo_cand AS (
    SELECT c.*
    FROM unnest(:queues::text[]) AS q(name)
    CROSS JOIN (VALUES (0), (1)) AS k(keyed)
    CROSS JOIN LATERAL (
        SELECT j.id, j.queue, j.priority, j.scheduled_at, j.fairness_key
        FROM {schema}.jobs j
        WHERE j.status = 'pending'
          AND j.queue = q.name
          AND (coalesce(nullif(j.fairness_key, ''), '__null__') <> '__null__')::integer = k.keyed
          AND array_position(:actors::text[], j.actor) IS NOT NULL
          AND j.actor NOT IN (SELECT cf.actor FROM cfg cf)
          AND j.scheduled_at <= (SELECT r.now FROM req r)
        ORDER BY j.priority DESC, j.scheduled_at, j.id
        LIMIT :limit
        FOR UPDATE OF j SKIP LOCKED
    ) AS c
    WHERE q.name NOT IN (SELECT rq.name FROM rr rq)
),
rr_keyed AS (
    -- Each cohort with a fairness key and pending jobs in each round_robin queue, walked
    -- in jobs_cohort_idx: one probe per cohort, which lands on the cohort's first job in
    -- dispatch order.
    SELECT f.*
    FROM rr rq
    CROSS JOIN LATERAL (
        SELECT j.id, j.queue, j.priority, j.scheduled_at, j.fairness_key,
               coalesce(nullif(j.fairness_key, ''), '__null__') AS cohort,
               array_position(:actors::text[], j.actor) IS NOT NULL
                   AND j.actor NOT IN (SELECT cf.actor FROM cfg cf)
                   AND j.scheduled_at <= (SELECT r.now FROM req r) AS eligible
        FROM {schema}.jobs j
        WHERE j.status = 'pending' AND j.queue = rq.name
          AND coalesce(nullif(j.fairness_key, ''), '__null__') <> '__null__'
        ORDER BY coalesce(nullif(j.fairness_key, ''), '__null__'), j.priority DESC,
                 j.scheduled_at, j.id
        LIMIT 1
    ) AS f
    UNION ALL
    SELECT f.*
    FROM rr_keyed rc
    CROSS JOIN LATERAL (
        SELECT j.id, j.queue, j.priority, j.scheduled_at, j.fairness_key,
               coalesce(nullif(j.fairness_key, ''), '__null__') AS cohort,
               array_position(:actors::text[], j.actor) IS NOT NULL
                   AND j.actor NOT IN (SELECT cf.actor FROM cfg cf)
                   AND j.scheduled_at <= (SELECT r.now FROM req r) AS eligible
        FROM {schema}.jobs j
        WHERE j.status = 'pending' AND j.queue = rc.queue
          AND coalesce(nullif(j.fairness_key, ''), '__null__') > rc.cohort
          AND coalesce(nullif(j.fairness_key, ''), '__null__') <> '__null__'
        ORDER BY coalesce(nullif(j.fairness_key, ''), '__null__'), j.priority DESC,
                 j.scheduled_at, j.id
        LIMIT 1
    ) AS f
),
rr_cohort AS (
    -- The keyed cohorts and the '__null__' one (jobs without a key): its first job is the
    -- first of the queue's range 0 of jobs_dispatch_idx.
    SELECT * FROM rr_keyed
    UNION ALL
    SELECT f.*
    FROM rr rq
    CROSS JOIN LATERAL (
        SELECT j.id, j.queue, j.priority, j.scheduled_at, j.fairness_key,
               '__null__'::text AS cohort,
               array_position(:actors::text[], j.actor) IS NOT NULL
                   AND j.actor NOT IN (SELECT cf.actor FROM cfg cf)
                   AND j.scheduled_at <= (SELECT r.now FROM req r) AS eligible
        FROM {schema}.jobs j
        WHERE j.status = 'pending' AND j.queue = rq.name
          AND (coalesce(nullif(j.fairness_key, ''), '__null__') <> '__null__')::integer = 0
        ORDER BY j.priority DESC, j.scheduled_at, j.id
        LIMIT 1
    ) AS f
),
rr_head AS MATERIALIZED (
    -- The first due job of each cohort in each round_robin queue: the walk's row when this
    -- worker may take it, else the cohort's first one it may.
    SELECT rc.cohort, rc.id, rc.queue, rc.priority, rc.scheduled_at, rc.fairness_key
    FROM rr_cohort rc
    WHERE rc.eligible
    UNION ALL
    SELECT rc.cohort, c.*
    FROM rr_cohort rc
    CROSS JOIN LATERAL (
        -- One branch runs: a keyed cohort is a range of jobs_cohort_idx, the '__null__'
        -- cohort range 0 of jobs_dispatch_idx.
        (
            SELECT j.id, j.queue, j.priority, j.scheduled_at, j.fairness_key
            FROM {schema}.jobs j
            WHERE rc.cohort <> '__null__'
              AND j.status = 'pending'
              AND j.queue = rc.queue
              AND coalesce(nullif(j.fairness_key, ''), '__null__') = rc.cohort
              AND coalesce(nullif(j.fairness_key, ''), '__null__') <> '__null__'
              AND array_position(:actors::text[], j.actor) IS NOT NULL
              AND j.actor NOT IN (SELECT cf.actor FROM cfg cf)
              AND j.scheduled_at <= (SELECT r.now FROM req r)
            ORDER BY j.priority DESC, j.scheduled_at, j.id
            LIMIT 1
        )
        UNION ALL
        (
            SELECT j.id, j.queue, j.priority, j.scheduled_at, j.fairness_key
            FROM {schema}.jobs j
            WHERE rc.cohort = '__null__'
              AND j.status = 'pending'
              AND j.queue = rc.queue
              AND (coalesce(nullif(j.fairness_key, ''), '__null__') <> '__null__')::integer = 0
              AND array_position(:actors::text[], j.actor) IS NOT NULL
              AND j.actor NOT IN (SELECT cf.actor FROM cfg cf)
              AND j.scheduled_at <= (SELECT r.now FROM req r)
            ORDER BY j.priority DESC, j.scheduled_at, j.id
            LIMIT 1
        )
    ) AS c
    WHERE NOT rc.eligible
),
rr_rest AS (
    -- Later jobs of a cohort can be dispatched only when fewer than :limit cohorts have
    -- a due job (else the first round fills the claim): then up to :limit per cohort.
    SELECT rc.cohort, c.*
    FROM rr_cohort rc
    CROSS JOIN LATERAL (
        -- One branch runs: a keyed cohort is a range of jobs_cohort_idx, the '__null__'
        -- cohort range 0 of jobs_dispatch_idx.
        (
            SELECT j.id, j.queue, j.priority, j.scheduled_at, j.fairness_key
            FROM {schema}.jobs j
            WHERE rc.cohort <> '__null__'
              AND j.status = 'pending'
              AND j.queue = rc.queue
              AND coalesce(nullif(j.fairness_key, ''), '__null__') = rc.cohort
              AND coalesce(nullif(j.fairness_key, ''), '__null__') <> '__null__'
              AND array_position(:actors::text[], j.actor) IS NOT NULL
              AND j.actor NOT IN (SELECT cf.actor FROM cfg cf)
              AND j.scheduled_at <= (SELECT r.now FROM req r)
            ORDER BY j.priority DESC, j.scheduled_at, j.id
            OFFSET 1
            LIMIT :limit - 1
        )
        UNION ALL
        (
            SELECT j.id, j.queue, j.priority, j.scheduled_at, j.fairness_key
            FROM {schema}.jobs j
            WHERE rc.cohort = '__null__'
              AND j.status = 'pending'
              AND j.queue = rc.queue
              AND (coalesce(nullif(j.fairness_key, ''), '__null__') <> '__null__')::integer = 0
              AND array_position(:actors::text[], j.actor) IS NOT NULL
              AND j.actor NOT IN (SELECT cf.actor FROM cfg cf)
              AND j.scheduled_at <= (SELECT r.now FROM req r)
            ORDER BY j.priority DESC, j.scheduled_at, j.id
            OFFSET 1
            LIMIT :limit - 1
        )
    ) AS c
    WHERE (SELECT count(DISTINCT h.cohort) FROM rr_head h) < :limit
),
rr_cand AS (
    -- Ranked in their cohort across the round_robin queues; only ranks up to :limit count.
    SELECT ranked.id, ranked.queue, ranked.priority, ranked.scheduled_at, ranked.fairness_key
    FROM (
        SELECT x.id, x.queue, x.priority, x.scheduled_at, x.fairness_key,
               row_number() OVER (
                   PARTITION BY x.cohort ORDER BY x.priority DESC, x.scheduled_at, x.id
               ) AS rank_in_cohort
        FROM (SELECT * FROM rr_head UNION ALL SELECT * FROM rr_rest) AS x
    ) AS ranked
    WHERE ranked.rank_in_cohort <= :limit
),
capped_cand AS (
    SELECT c.*, k.actor, k.residual
    FROM caps k
    CROSS JOIN unnest(:queues::text[]) AS q(name)
    CROSS JOIN LATERAL (
        SELECT j.id, j.queue, j.priority, j.scheduled_at, j.fairness_key
        FROM {schema}.jobs j
        WHERE j.status = 'pending'
          AND j.actor = k.actor
          AND j.queue = q.name
          AND j.scheduled_at <= (SELECT r.now FROM req r)
        ORDER BY j.priority DESC, j.scheduled_at, j.id
        LIMIT k.residual
        FOR UPDATE OF j SKIP LOCKED
    ) AS c
    WHERE k.residual > 0
),
capped_eligible AS (
    SELECT e.id, e.queue, e.priority, e.scheduled_at, e.fairness_key
    FROM (
        SELECT cc.*,
               row_number() OVER (
                   PARTITION BY cc.actor ORDER BY cc.priority DESC, cc.scheduled_at, cc.id
               ) AS rank_in_actor
        FROM capped_cand cc
    ) AS e
    WHERE e.rank_in_actor <= e.residual
),
cand AS (
    SELECT * FROM fifo_cand
    UNION ALL
    SELECT * FROM rr_cand
    UNION ALL
    SELECT * FROM capped_eligible
),
cohorted AS (
    -- cohort: NULL for strict_fifo jobs (one cohort, first in every round); wrapped: the
    -- cohort is not after its queue's rotation cursor, so it waits for the next turn.
    SELECT cd.id, cd.priority, cd.scheduled_at, k.cohort,
           coalesce(k.cohort COLLATE "C" <= rq.rr_cursor COLLATE "C", false) AS wrapped
    FROM cand cd
    LEFT JOIN rr rq ON rq.name = cd.queue
    CROSS JOIN LATERAL (
        SELECT CASE WHEN rq.name IS NOT NULL
                    THEN coalesce(nullif(cd.fairness_key, ''), '__null__') END AS cohort
    ) AS k
),
rounds AS (
    SELECT ch.id, ch.priority, ch.scheduled_at, ch.cohort, ch.wrapped,
           row_number() OVER (
               PARTITION BY ch.cohort
               ORDER BY ch.priority DESC, ch.scheduled_at, ch.id
           ) AS round
    FROM cohorted ch
),
ordered AS MATERIALIZED (
    -- The domain's (round, wrapped, cohort, priority desc, scheduled_at, id), cohorts in
    -- code-point order as Python compares them.
    SELECT rd.id,
           row_number() OVER (
               ORDER BY rd.round, rd.wrapped, rd.cohort COLLATE "C" NULLS FIRST,
                        rd.priority DESC, rd.scheduled_at, rd.id
           ) AS ord
    FROM rounds rd
    ORDER BY rd.round, rd.wrapped, rd.cohort COLLATE "C" NULLS FIRST,
             rd.priority DESC, rd.scheduled_at, rd.id
    LIMIT :limit
),
picked AS MATERIALIZED (
    -- Round-robin candidates were read unlocked: lock the picks by primary key, then keep
    -- those still pending (another claimer may have taken one meanwhile: the claim then
    -- returns fewer jobs, never a taken one).
    SELECT j.id, j.status
    FROM {schema}.jobs j
    WHERE j.id = ANY (ARRAY(SELECT o.id FROM ordered o))
    FOR UPDATE OF j SKIP LOCKED
),
claimed AS (
    -- = ANY (ARRAY(...)): at most :limit primary-key probes, whatever the estimates say.
    UPDATE {schema}.jobs j
    SET status = 'running',
        locked_by = :worker_id::text,
        lock_expires_at = (SELECT r.now FROM req r) + :lease::interval,
        fencing_token = j.fencing_token + 1,
        attempt = j.attempt + 1,
        -- Started only where a consumer waits for it (:start_now, in dispatch order);
        -- the rest run after a start mark, so an empty started_at means never run.
        started_at = CASE WHEN j.id = ANY (ARRAY(
                             SELECT p.id FROM ordered p WHERE p.ord <= :start_now::bigint))
                         THEN (SELECT r.now FROM req r) END
    WHERE j.id = ANY (ARRAY(SELECT p.id FROM picked p WHERE p.status = 'pending'))
    -- Times outside years 1..9999 (written by other means) are clamped into them: no
    -- driver can load them, and one such row must not fail the whole claim.
    RETURNING j.id, j.queue, j.actor, j.payload::text AS payload, j.priority, j.attempt,
              j.max_attempts, j.fencing_token,
              LEAST(GREATEST(j.scheduled_at, '0001-01-01 00:00:00+00'),
                    '9999-12-31 23:59:59+00') AS scheduled_at,
              j.lock_expires_at,
              CASE WHEN j.schedule_to_close IS NOT NULL  -- GREATEST would turn NULL into 0001
                   THEN LEAST(GREATEST(j.schedule_to_close, '0001-01-01 00:00:00+00'),
                              '9999-12-31 23:59:59+00') END AS schedule_to_close,
              j.fairness_key, j.metadata::text AS metadata, j.trace_id, j.span_id,
              j.started_at IS NOT NULL AS started, j.attempt_timeout
),
rotated AS (
    -- Each round_robin queue's cursor moves to the cohort of the last job this claim took
    -- there (no write when it is already there). SKIP LOCKED: while another claim holds
    -- the row, that claim moves it instead, and this one never waits (so never deadlocks)
    -- on it.
    UPDATE {schema}.queues qm
    SET rr_cursor = mv.cohort
    FROM (
        SELECT lk.name, last.cohort
        FROM {schema}.queues lk
        JOIN (
            SELECT DISTINCT ON (cl.queue) cl.queue,
                   coalesce(nullif(cl.fairness_key, ''), '__null__') AS cohort
            FROM claimed cl
            JOIN ordered o ON o.id = cl.id
            WHERE cl.queue IN (SELECT rq.name FROM rr rq)
            ORDER BY cl.queue, o.ord DESC
        ) AS last ON last.queue = lk.name
        WHERE lk.rr_cursor IS DISTINCT FROM last.cohort
        FOR UPDATE OF lk SKIP LOCKED
    ) AS mv
    WHERE qm.name = mv.name
    RETURNING qm.name
)
SELECT NOT EXISTS (SELECT 1 FROM cfg) AND NOT EXISTS (SELECT 1 FROM rr) AS simple, cl.*
FROM (SELECT 1) AS one
LEFT JOIN (claimed cl JOIN ordered o ON o.id = cl.id) ON true
ORDER BY o.ord

-- name: mark_started
-- Owned rows are locked in id order (as by every multi-row owner write) so it cannot deadlock with a heartbeat.
WITH src AS (
    SELECT *
    FROM unnest(:job_id::bigint[], :fencing_token::bigint[], :started_ago::interval[])
        AS s(job_id, fencing_token, started_ago)
),
locked AS (
    -- By primary key only, then checked (see finish_and_claim for why).
    SELECT j.id, j.fencing_token, j.status
    FROM {schema}.jobs j
    WHERE j.id = ANY (:job_id::bigint[])
    ORDER BY j.id
    FOR UPDATE OF j
),
owned AS (
    SELECT l.id, l.fencing_token, s.started_ago
    FROM locked l
    JOIN src s ON s.job_id = l.id AND s.fencing_token = l.fencing_token
    WHERE l.status = 'running'
),
started AS (
    -- A late mark says how long ago the attempt began (started_ago; NULL: just now).
    UPDATE {schema}.jobs j
    SET started_at = coalesce(:now::timestamptz, now()) - coalesce(o.started_ago, interval '0')
    FROM owned o
    WHERE j.id = o.id AND j.started_at IS NULL
    RETURNING j.id
)
SELECT o.id, o.fencing_token, (SELECT count(*) FROM started) AS started FROM owned o

-- name: drain_unstarted
-- Back to pending where it was in line (scheduled_at kept), attempt refunded: the attempt never ran.
-- A job whose cancel was requested ends cancelled instead (asked to stop, it never ran).
WITH unstarted AS (
    SELECT j.id
    FROM {schema}.jobs j
    WHERE j.locked_by = :worker_id::text AND j.status = 'running' AND j.started_at IS NULL
    ORDER BY j.id
    FOR UPDATE
),
drained AS (
    UPDATE {schema}.jobs j
    SET status = CASE WHEN j.cancel_phase >= 1 THEN 'cancelled' ELSE 'pending' END,
        finished_at = CASE WHEN j.cancel_phase >= 1 THEN coalesce(:now::timestamptz, now())
                           ELSE j.finished_at END,
        attempt = greatest(j.attempt - 1, 0),
        locked_by = NULL, lock_expires_at = NULL
    WHERE j.id = ANY (ARRAY(SELECT u.id FROM unstarted u))
    RETURNING j.id
)
SELECT count(*) AS drained FROM drained
