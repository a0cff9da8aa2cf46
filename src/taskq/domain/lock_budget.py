"""How much of a connection's client-side per-query timeout an enqueue lock budget may use.

The server-side ``lock_timeout`` a budget becomes must expire *before* the
client's timer, because only the server's expiry yields the typed refusal
(``MaxPendingLockTimeoutError``, ...); the client timer starts earlier (before
``SET LOCAL lock_timeout`` even runs) and produces a bare ``TimeoutError``.
Half the bound leaves the other half for the round trips around the wait, so
the server's verdict wins the race, yet a budget still gets a meaningful slice.
"""

from __future__ import annotations

from typing import Final

LOCK_BUDGET_COMMAND_TIMEOUT_SHARE: Final = 0.5

#: Seconds one client call may take in all (``TASKQ_CLIENT_CALL_TIMEOUT``'s default, and
#: the bound of a client on a pool of yours unless given): its lock waits get the share
#: above, the rest is for the pool and the server's answer.
DEFAULT_CLIENT_CALL_TIMEOUT: Final = 10.0


def bounded_lock_budget_ms(budget_ms: float, command_timeout_secs: float | None) -> float:
    """Clamp one enqueue lock budget to its share of the connection's per-query timeout.

    If the budget reached the client-side timeout, the client timer would
    always win and the caller would get a bare ``TimeoutError``: an unclamped
    budget is not a longer wait, it is no verdict at all.

    Returned unchanged when there is no client-side bound
    (``command_timeout_secs`` ``None`` or ``<= 0``) or when the budget is
    ``<= 0`` (an unbounded wait, the ``lock_timeout`` convention).
    """
    if command_timeout_secs is None or command_timeout_secs <= 0 or budget_ms <= 0:
        return budget_ms
    return min(budget_ms, command_timeout_secs * 1000.0 * LOCK_BUDGET_COMMAND_TIMEOUT_SHARE)


__all__ = [
    "DEFAULT_CLIENT_CALL_TIMEOUT",
    "LOCK_BUDGET_COMMAND_TIMEOUT_SHARE",
    "bounded_lock_budget_ms",
]
