-- Reverts 0002_workers.
DROP TABLE IF EXISTS {schema}.maintenance_leader;
DROP TABLE IF EXISTS {schema}.workers;
