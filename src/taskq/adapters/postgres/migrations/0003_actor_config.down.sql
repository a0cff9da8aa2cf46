-- Reverts 0003_actor_config.
DROP TABLE IF EXISTS {schema}.queues;
DROP TABLE IF EXISTS {schema}.actor_config;
