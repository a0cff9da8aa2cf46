-- Postgres state of the rate limiter (the fallback when Redis fails).

-- Concurrency reservations: slot in [0, capacity) of key; a free slot has no row, or a
-- row whose lease expired.
CREATE TABLE {schema}.reservation_slots (
    key              text        NOT NULL,
    slot             integer     NOT NULL,
    holder           text        NOT NULL,
    token            text        NOT NULL,
    lease_expires_at timestamptz NOT NULL,
    PRIMARY KEY (key, slot),
    CONSTRAINT reservation_slots_slot_check CHECK (slot >= 0)
) WITH (fillfactor = 80);
-- Heartbeat: extend every reservation of one holder.
CREATE INDEX reservation_slots_holder_idx ON {schema}.reservation_slots (holder);
-- Sweep: delete expired reservations.
CREATE INDEX reservation_slots_expiry_idx ON {schema}.reservation_slots (lease_expires_at);

-- Fixed windows aligned to the epoch: one counter per key and window start.
-- expires_at (window_start + window) lets a sweep delete old windows of any length.
CREATE TABLE {schema}.rate_limit_windows (
    key          text        NOT NULL,
    window_start timestamptz NOT NULL,
    count        integer     NOT NULL DEFAULT 0,
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (key, window_start),
    CONSTRAINT rate_limit_windows_count_check CHECK (count >= 0)
) WITH (fillfactor = 80);
-- Sweep: delete windows that ended.
CREATE INDEX rate_limit_windows_expiry_idx ON {schema}.rate_limit_windows (expires_at);
