-- Wake-ups on the taskq_wake_<schema> channel (Schema.wake_channel). LISTEN itself takes
-- an identifier, not a parameter, so each driver issues it with its own identifier quoting.

-- name: publish_wake
-- pg_notify rather than NOTIFY: channel and payload are bound parameters, never pasted into SQL.
SELECT pg_notify(:channel::text, :queue::text)

-- name: ping
-- The cheapest round trip that proves the listening session is still alive.
SELECT 1 AS alive
