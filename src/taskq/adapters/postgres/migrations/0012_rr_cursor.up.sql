-- A round_robin queue's rotation cursor: the fairness cohort its last claim took last
-- (NULL: none yet). A claim serves the cohorts after it first (taskq.domain.dispatch), so
-- that claims smaller than the number of cohorts still take the cohorts in turn. Claims
-- move it under FOR UPDATE SKIP LOCKED: a claimer never waits for it.
--
-- Adding a nullable column without a default rewrites nothing.
ALTER TABLE {schema}.queues ADD COLUMN rr_cursor text;
