"""What an adapter hands the contract suite.

An adapter author writes one *factory*: an async context manager function
taking no arguments and yielding a :class:`Harness`. The suite runs against it
with ``pytest --taskq-adapter=module:factory`` (see ``docs/contract-suite.md``).

The harness gives fresh, empty state per test (a new schema, a new memory
store) and tears it down on exit.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime

from taskq.ports.clock import Clock
from taskq.ports.leader_lock import LeaderLock
from taskq.ports.notifier import Notifier
from taskq.ports.queue_store import QueueStore
from taskq.ports.rate_limiter import RateLimiter

#: Contract tests pass explicit ``now`` values starting here, so timestamps are exact.
EPOCH = datetime(2030, 1, 1, tzinfo=UTC)


@dataclass
class Harness:
    """One adapter's ports, fresh for one test.

    - ``store``: the store under test, empty.
    - ``open_store``: another independent store on the same state (another
      connection pool / process view), for concurrency tests. Closed by the
      harness on exit.
    - ``open_leader_lock`` / ``open_notifier``: new instances sharing the same
      namespace (schema), as separate workers would have. Closed on exit.
    - ``sever``: kill the backend session behind a leader lock or notifier
      (``pg_terminate_backend`` for Postgres) to test loss and reconnect. It
      returns once the session is gone and what it held (the lock) is released.
    - ``open_rate_limiter``: a limiter instance on shared state, or None when
      the adapter has none.
    - ``clock``: the adapter's time source (a fake clock for memory).
    """

    name: str
    store: QueueStore
    open_store: Callable[[], Awaitable[QueueStore]]
    open_leader_lock: Callable[[], Awaitable[LeaderLock]]
    open_notifier: Callable[[], Awaitable[Notifier]]
    sever: Callable[[object], Awaitable[None]]
    clock: Clock
    open_rate_limiter: Callable[[], Awaitable[RateLimiter]] | None = None
    capabilities: frozenset[str] = field(default_factory=frozenset)


#: An adapter's contract factory.
HarnessFactory = Callable[[], AbstractAsyncContextManager[Harness]]

__all__ = ["EPOCH", "Harness", "HarnessFactory"]
