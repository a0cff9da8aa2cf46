"""The ports: what the app needs from the outside world, as typing.Protocols.

Each docstring states the contract every adapter must keep; ``contracts/``
checks it. Ports speak domain types only.
"""

from taskq.ports.clock import Clock
from taskq.ports.leader_lock import LeaderLock
from taskq.ports.notifier import Notifier
from taskq.ports.queue_store import (
    ActorConfigAdmin,
    JobCanceller,
    JobClaimer,
    JobEnqueuer,
    JobFinisher,
    JobReader,
    LeaseJanitor,
    QueueAdmin,
    QueueStore,
    RetentionJanitor,
    WorkerRegistry,
    WorkerStore,
)
from taskq.ports.rate_limiter import RateLimiter

__all__ = [
    "ActorConfigAdmin",
    "Clock",
    "JobCanceller",
    "JobClaimer",
    "JobEnqueuer",
    "JobFinisher",
    "JobReader",
    "LeaderLock",
    "LeaseJanitor",
    "Notifier",
    "QueueAdmin",
    "QueueStore",
    "RateLimiter",
    "RetentionJanitor",
    "WorkerRegistry",
    "WorkerStore",
]
