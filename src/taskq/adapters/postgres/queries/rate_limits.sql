-- The Postgres rate limiter (the fallback when Redis fails): fixed windows aligned to the
-- epoch in rate_limit_windows, leased concurrency slots in reservation_slots.
-- Every decision is one statement, so racing callers on any connection never overshoot.
-- Windows are keyed by (key, window start), as in Redis: use one window length per key.
-- :now NULL means the database clock; times are whole microseconds, as the tables keep them,
-- and durations are added as microseconds so the session time zone never changes a length.

-- name: acquire_rate
-- The conditional upsert counts a call only while count < limit; ON CONFLICT re-reads the latest count under its row lock.
WITH clock AS (
    SELECT (extract(epoch FROM coalesce(:now::timestamptz, statement_timestamp())) * 1000000)::bigint AS now_us
), win AS (
    SELECT now_us, floor(now_us::numeric / :window_us::bigint)::bigint * :window_us::bigint AS start_us
    FROM clock
), counted AS (
    INSERT INTO {schema}.rate_limit_windows AS w (key, window_start, count, expires_at)
    SELECT :key::text,
           to_timestamp(0) + win.start_us * interval '1 microsecond',
           1,
           to_timestamp(0) + (win.start_us + :window_us::bigint) * interval '1 microsecond'
    FROM win
    WHERE :limit::integer > 0
    ON CONFLICT (key, window_start) DO UPDATE
        SET count = w.count + 1
        WHERE w.count < :limit::integer
    RETURNING w.count
)
SELECT EXISTS (SELECT 1 FROM counted) AS allowed,
       win.start_us + :window_us::bigint - win.now_us AS retry_after_us,
       win.start_us AS window_start_us
FROM win

-- name: refund_rate
-- Gives one counted call back to its own window; count > 0 keeps a repeated refund from going below zero.
WITH refunded AS (
    UPDATE {schema}.rate_limit_windows
    SET count = count - 1
    WHERE key = :key::text
      AND window_start = to_timestamp(0) + :window_start_us::bigint * interval '1 microsecond'
      AND count > 0
    RETURNING 1
)
SELECT count(*) AS refunded FROM refunded

-- name: reserve_slot
-- Picks a free or expired slot and claims it in one upsert; ON CONFLICT re-checks that slot's latest row, so two racers never share it.
WITH clock AS (
    SELECT coalesce(:now::timestamptz, statement_timestamp()) AS now
), candidate AS (
    SELECT s.slot
    FROM clock, generate_series(0, :capacity::integer - 1) AS s (slot)
    WHERE NOT EXISTS (
        SELECT 1
        FROM {schema}.reservation_slots AS r
        WHERE r.key = :key::text AND r.slot = s.slot AND r.lease_expires_at > clock.now
    )
    ORDER BY CASE WHEN :spread::boolean THEN random() ELSE 0 END, s.slot
    LIMIT 1
), taken AS (
    INSERT INTO {schema}.reservation_slots AS r (key, slot, holder, token, lease_expires_at)
    SELECT :key::text, candidate.slot, :holder::text, :token::text,
           clock.now + :lease_us::bigint * interval '1 microsecond'
    FROM candidate, clock
    ON CONFLICT (key, slot) DO UPDATE
        SET holder = excluded.holder,
            token = excluded.token,
            lease_expires_at = excluded.lease_expires_at
        WHERE r.lease_expires_at <= (SELECT now FROM clock)
    RETURNING r.slot
)
SELECT (SELECT slot FROM taken) AS slot, EXISTS (SELECT 1 FROM candidate) AS had_free

-- name: release_slot
-- Matches the token, so releasing a reservation whose slot expired and was reused frees nothing.
WITH released AS (
    DELETE FROM {schema}.reservation_slots
    WHERE key = :key::text AND slot = :slot::integer AND token = :token::text
    RETURNING 1
)
SELECT count(*) AS released FROM released

-- name: extend_holder
-- Only live reservations move: one that already expired may hold a slot someone else now has.
WITH clock AS (
    SELECT coalesce(:now::timestamptz, statement_timestamp()) AS now
), extended AS (
    UPDATE {schema}.reservation_slots AS r
    SET lease_expires_at = clock.now + :lease_us::bigint * interval '1 microsecond'
    FROM clock
    WHERE r.holder = :holder::text AND r.lease_expires_at > clock.now
    RETURNING 1
)
SELECT count(*) AS extended FROM extended

-- name: sweep_expired
-- Also drops windows that have ended (not counted): nothing reads them again, and they would pile up.
WITH clock AS (
    SELECT coalesce(:now::timestamptz, statement_timestamp()) AS now
), old_windows AS (
    DELETE FROM {schema}.rate_limit_windows AS w
    USING clock
    WHERE w.expires_at <= clock.now
), swept AS (
    DELETE FROM {schema}.reservation_slots AS r
    USING clock
    WHERE r.lease_expires_at <= clock.now
    RETURNING 1
)
SELECT count(*) AS swept FROM swept
