-- A job's own attempt timeout (JobsClient.enqueue(..., timeout=...)), which overrides its
-- actor's @actor(timeout=...) and comes back with each claim. NULL, what almost every job
-- holds, is no override: the actor's timeout applies, if it has one. The archive keeps it
-- with the rest of the job.
--
-- Adding a nullable column without a default rewrites nothing.
ALTER TABLE {schema}.jobs ADD COLUMN attempt_timeout interval;
ALTER TABLE {schema}.jobs_archive ADD COLUMN attempt_timeout interval;
