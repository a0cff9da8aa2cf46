-- Reverts 0004_rate_limits.
DROP TABLE IF EXISTS {schema}.rate_limit_windows;
DROP TABLE IF EXISTS {schema}.reservation_slots;
