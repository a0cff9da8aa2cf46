"""The ports one worker runs on, and which of them it must close."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final

from taskq.app.worker.events import WORKER_CLEANUP_FAILED, emit
from taskq.app.worker.waiting import with_timeout
from taskq.ports.clock import Clock
from taskq.ports.leader_lock import LeaderLock
from taskq.ports.notifier import Notifier
from taskq.ports.queue_store import WorkerStore
from taskq.ports.rate_limiter import RateLimiter

#: Role names used in :attr:`WorkerPorts.owned`, in the order they are closed.
ROLES: Final = ("notifier", "leader_lock", "rate_limiter", "store")


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerPorts:
    """A worker's store, leader lock, notifier, rate limiter and clock.

    ``notifier`` may be None (poll-only dispatch) and so may ``rate_limiter``
    (no reservation leases to extend or sweep). ``owned`` names the roles
    TaskQ built and therefore closes at exit; ports a caller handed in are
    caller-owned and left open.
    """

    store: WorkerStore
    leader_lock: LeaderLock
    clock: Clock
    notifier: Notifier | None = None
    rate_limiter: RateLimiter | None = None
    owned: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        unknown = self.owned - set(ROLES)
        if unknown:
            raise ValueError(f"owned names unknown roles {sorted(unknown)}; roles are {ROLES}")

    async def close_owned(self, budget: float | None = None) -> None:
        """Close every owned port (notifier first, store last); failures are logged, not raised.

        With ``budget``, a close still running after that many seconds is given up
        (cancelled, not waited for): on a dead network a graceful close can wait out
        a connect timeout, and the process is leaving anyway.
        """
        for role in ROLES:
            port = getattr(self, role)
            if role not in self.owned or port is None:
                continue
            try:
                if budget is None:
                    await port.close()
                else:
                    await with_timeout(self.clock, budget, port.close(), abandon=True)
            except TimeoutError:
                emit(
                    WORKER_CLEANUP_FAILED,
                    logging.WARNING,
                    step=f"close {role}",
                    error=f"not closed within {budget:g}s; given up",
                )
            except Exception:
                emit(WORKER_CLEANUP_FAILED, logging.WARNING, exc_info=True, step=f"close {role}")
