"""The worker's rate limiter on Redis, with the Postgres one as fallback."""

from __future__ import annotations

from taskq.adapters.postgres.schema import Schema
from taskq.app.connections import WorkerConnections
from taskq.app.settings import WorkerSettings
from taskq.domain.errors import ConfigurationError, RateLimitUnavailable, TaskQError
from taskq.ports.rate_limiter import RateLimiter


async def redis_rate_limiter(
    settings: WorkerSettings,
    schema: Schema,
    connections: WorkerConnections,
    pg_limiter: RateLimiter | None,
) -> RateLimiter | None:
    """The rate limiter on Redis when a client is given, made or configured, else ``pg_limiter``.

    With a Postgres limiter to fall back on, Redis is wrapped in
    ``FallbackRateLimiter`` (``TASKQ_RATE_LIMIT_PG_FALLBACK_ENABLED``).
    """
    if connections.redis_client is not None:
        client, owns = connections.redis_client, False
        _require_redis(client, "redis_client", "is")
    elif connections.redis_client_factory is not None:
        try:
            client, owns = await connections.redis_client_factory(), True
        except TaskQError:
            raise
        except Exception as exc:
            raise RateLimitUnavailable(
                f"WorkerConnections.redis_client_factory failed: {type(exc).__name__}: {exc}"
            ) from exc
        _require_redis(client, "redis_client_factory", "returned")
    elif settings.redis_url is not None:
        from taskq.adapters.redis import make_redis_client

        client, owns = make_redis_client(settings.redis_url), True
    else:
        return pg_limiter
    from taskq.adapters.redis import FallbackRateLimiter, RedisRateLimiter

    redis_limiter = RedisRateLimiter(client, prefix=f"taskq:{schema.name}", owns_client=owns)
    if pg_limiter is None:
        return redis_limiter
    return FallbackRateLimiter(
        redis_limiter, pg_limiter, enabled=settings.rate_limit_pg_fallback_enabled
    )


def _require_redis(client: object, field: str, verb: str) -> None:
    """Refuse what is not a redis.asyncio client before the limiter uses it (a URL, None)."""
    if not callable(getattr(client, "register_script", None)):
        raise ConfigurationError(
            f"WorkerConnections.{field} {verb} {client!r:.80} ({type(client).__name__}); "
            "it must be a redis.asyncio.Redis client (to use a URL, set TASKQ_REDIS_URL)"
        )
