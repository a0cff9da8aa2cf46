"""TaskQ on asyncpg: the QueueStore and friends, and the migration runner."""
