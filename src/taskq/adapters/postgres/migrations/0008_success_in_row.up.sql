-- A succeeded attempt is recorded by the job row alone: finish_and_claim no longer inserts
-- a job_attempts row for it (a heap row, two index entries and their WAL per job, about a
-- tenth of the server's work in a drain). The row already holds that attempt's number,
-- start, finish and outcome; finished_by keeps the worker that wrote the outcome, and the
-- attempt-history read adds the row as the last attempt of a succeeded job. Every other
-- outcome (retries, snoozes, releases, reclaims, failures) still gets its job_attempts row.
--
-- Adding a nullable column without a default rewrites nothing.
ALTER TABLE {schema}.jobs ADD COLUMN finished_by text;
ALTER TABLE {schema}.jobs_archive ADD COLUMN finished_by text;
