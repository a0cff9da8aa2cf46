-- Stored per-actor configuration and per-queue dispatch modes.

-- Structural fields (queue, metadata) are checked for drift at worker start; capacity
-- fields are operator-owned, and NULL means unlimited (max_concurrent) or the code
-- literal (max_pending, result_ttl).
CREATE TABLE {schema}.actor_config (
    actor          text        PRIMARY KEY,
    queue          text        NOT NULL,
    metadata       jsonb       NOT NULL DEFAULT '{}'::jsonb,
    max_concurrent integer,
    max_pending    integer,
    result_ttl     interval,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    -- Zero is allowed: it pauses dispatch (max_concurrent) or enqueue (max_pending).
    CONSTRAINT actor_config_max_concurrent_check
        CHECK (max_concurrent IS NULL OR max_concurrent >= 0),
    CONSTRAINT actor_config_max_pending_check CHECK (max_pending IS NULL OR max_pending >= 0),
    CONSTRAINT actor_config_result_ttl_check
        CHECK (result_ttl IS NULL OR result_ttl >= interval '0')
);

-- A queue without a row is strict_fifo; rows exist only where an operator set a mode.
CREATE TABLE {schema}.queues (
    name       text        PRIMARY KEY,
    mode       text        NOT NULL DEFAULT 'strict_fifo',
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT queues_mode_check CHECK (mode IN ('strict_fifo', 'round_robin'))
);
