"""TaskQ: Postgres-backed, asyncio-native background jobs."""
