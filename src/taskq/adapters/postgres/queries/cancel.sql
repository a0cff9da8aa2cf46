-- Cancel requests from the API side (JobCanceller).

-- name: request_cancel
-- One statement: a waiting job is cancelled at once, a running one gets phase COOPERATIVE once; a finished one is only read.
-- :lock_timeout (text, NULL = leave as is) is set transaction-locally before the row is locked: the update reads req first.
WITH req AS MATERIALIZED (
    SELECT coalesce(:now::timestamptz, now()) AS now,
           CASE WHEN :lock_timeout::text IS NOT NULL
                THEN set_config('lock_timeout', :lock_timeout::text, true) END AS lock_timeout
),
changed AS (
    UPDATE {schema}.jobs j
    SET status = CASE WHEN j.status IN ('pending', 'scheduled') THEN 'cancelled'
                      ELSE j.status END,
        finished_at = CASE WHEN j.status IN ('pending', 'scheduled') THEN r.now
                           ELSE j.finished_at END,
        locked_by = CASE WHEN j.status IN ('pending', 'scheduled') THEN NULL
                         ELSE j.locked_by END,
        lock_expires_at = CASE WHEN j.status IN ('pending', 'scheduled') THEN NULL
                               ELSE j.lock_expires_at END,
        cancel_phase = CASE WHEN j.status = 'running' THEN 1 ELSE j.cancel_phase END,
        cancel_requested_at = r.now
    FROM req r
    WHERE j.id = :job_id::bigint
      AND (j.status IN ('pending', 'scheduled')
           OR (j.status = 'running' AND j.cancel_phase = 0))
    RETURNING j.status
)
SELECT (SELECT c.status FROM changed c) AS changed_status,
       (SELECT j.status FROM {schema}.jobs j WHERE j.id = :job_id::bigint) AS current_status
