-- Reverts 0001_jobs: drops the job tables and everything in them.
DROP TABLE IF EXISTS {schema}.job_attempts;
DROP TABLE IF EXISTS {schema}.jobs_archive;
DROP TABLE IF EXISTS {schema}.jobs;
