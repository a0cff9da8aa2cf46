"""Building a Redis client with TaskQ's resilience defaults.

The defaults are those of the connections reference: a 30 s health check so
an idle connection closed by the broker is noticed before use, TCP
keepalive, a 5 s socket timeout (the bound the limiter's fail-closed
behaviour relies on), and exactly one quick retry on connection and timeout
errors so a single dropped connection is healed without turning a dead
broker into a long stall.
"""

from __future__ import annotations

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

HEALTH_CHECK_INTERVAL = 30
SOCKET_TIMEOUT = 5.0
RETRY_RETRIES = 1  # one retry heals a stale pooled connection; more only delays a dead broker
RETRY_BASE = 0.02
RETRY_CAP = 0.1


def make_redis_client(url: str) -> Redis:
    """A client for ``url`` carrying the resilience defaults above."""
    return Redis.from_url(
        url,
        health_check_interval=HEALTH_CHECK_INTERVAL,
        socket_keepalive=True,
        socket_timeout=SOCKET_TIMEOUT,
        retry=Retry(ExponentialBackoff(cap=RETRY_CAP, base=RETRY_BASE), RETRY_RETRIES),
        retry_on_error=[RedisConnectionError, RedisTimeoutError],
    )
