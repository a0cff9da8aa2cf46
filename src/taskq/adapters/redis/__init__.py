"""Redis adapter: the rate limiter, with a fallback wrapper for when Redis fails."""

from taskq.adapters.redis.client import make_redis_client
from taskq.adapters.redis.fallback import FallbackRateLimiter
from taskq.adapters.redis.rate_limiter import RedisRateLimiter

__all__ = ["FallbackRateLimiter", "RedisRateLimiter", "make_redis_client"]
