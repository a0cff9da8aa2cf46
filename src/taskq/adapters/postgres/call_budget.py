"""One time bound on a store call: its waits for a connection, for its turn, for the answer.

A store built with ``call_timeout`` (a client's, ``TASKQ_CLIENT_CALL_TIMEOUT``)
runs each call inside a :class:`CallBudget`. At the deadline the budget
cancels the call's task, and the call raises a
:class:`~taskq.domain.errors.StoreTimeout` saying what it was waiting for:

- a free connection of its pool (:class:`~taskq.domain.errors.PoolWaitTimeout`:
  every connection in use, or none could be opened);
- its turn on a caller's connection that another call was using;
- the server's answer (:class:`~taskq.domain.errors.ServerAnswerTimeout`).

Lock waits end sooner and on the server's side: the statements that can wait
on a row lock set a transaction-local ``lock_timeout`` of half the bound (see
``store.base.budget_lock_timeout``), so Postgres' own verdict, which names the
lock, wins the race with the client-side deadline.

Bounds nest: a call that runs several statements (an enqueue that retries,
a transaction) opens one budget and its statements run inside it. Nothing is
reconfigured: a caller's pool or connection keeps its settings, the bound is
per call. The deadline's cancel lets the driver give the statement up
politely (asyncpg sends a cancel request in the background; psycopg asks the
server to cancel and waits for it); should the call still run
:data:`CANCEL_GRACE` later (a dead network never acknowledges), it is
cancelled again, and psycopg then closes the connection instead of waiting.
A budget belongs to the task that opened it: work the call hands to another
task (a wake-up sent in the background) is bounded on its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextvars import ContextVar, Token
from types import TracebackType
from typing import Final

from taskq.domain.errors import ServerAnswerTimeout, StoreTimeout

#: How long after the deadline's cancel a call may take to give its statement up
#: before it is cancelled again (and psycopg closes the connection).
CANCEL_GRACE: Final = 0.5

#: What the call waits for, as the error to raise if its bound runs out meanwhile.
OnExpiry = Callable[[float], StoreTimeout]

_current: ContextVar[CallBudget | None] = ContextVar("taskq_call_budget", default=None)


class CallBudget:
    """``async with CallBudget(seconds)``: the block ends within ``seconds`` (plus
    :data:`CANCEL_GRACE` at worst) or raises a ``StoreTimeout``.

    ``None`` bounds nothing. Inside another budget of the same task it does
    nothing either: the outer bound applies to the whole call.
    """

    __slots__ = (
        "_cancelling",
        "_error",
        "_fired",
        "_handle",
        "_task",
        "_token",
        "bound",
        "on_expiry",
    )

    def __init__(self, bound: float | None) -> None:
        self.bound = bound
        #: The error the call raises if the deadline passes now (None: no answer came).
        self.on_expiry: OnExpiry | None = None
        self._task: asyncio.Task[object] | None = None
        self._token: Token[CallBudget | None] | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._fired = 0
        self._cancelling = 0
        self._error: StoreTimeout | None = None

    def __repr__(self) -> str:
        return f"<CallBudget bound={self.bound!r} fired={self._fired}>"

    async def __aenter__(self) -> None:
        bound = self.bound
        if bound is None:
            return
        task = asyncio.current_task()
        if task is None:
            return
        outer = _current.get()
        if outer is not None and outer._task is task:
            return  # a statement of a call that has its budget already
        loop = asyncio.get_running_loop()
        self._task = task
        self._cancelling = task.cancelling()
        self._token = _current.set(self)
        self._handle = loop.call_at(loop.time() + bound, self._expire)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        token, task = self._token, self._task
        if token is None or task is None:
            return
        self._token = None
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        _current.reset(token)
        if not self._fired:
            return
        for _ in range(self._fired):
            task.uncancel()
        if exc_type is None or task.cancelling() > self._cancelling:
            return  # it finished all the same, or someone else cancels it too
        error = self._error
        assert error is not None
        raise error from exc

    def _expire(self) -> None:
        task = self._task
        assert task is not None
        if self._error is None:
            on_expiry = self.on_expiry
            bound = self.bound
            assert bound is not None
            self._error = on_expiry(bound) if on_expiry is not None else ServerAnswerTimeout(bound)
            # The second cancel, should the first not end the call (see the module docstring).
            self._handle = asyncio.get_running_loop().call_later(CANCEL_GRACE, self._expire)
        else:
            self._handle = None
        self._fired += 1
        task.cancel()


def active_budget() -> CallBudget | None:
    """The budget of the call the current task is in, if any."""
    budget = _current.get()
    if budget is None or budget._task is not asyncio.current_task():
        return None
    return budget


def inner_wait_timeout(default: float) -> float:
    """How long a wait inside the current budget may take before the budget ends it
    (``default`` outside one): a little past its deadline, so the budget's own
    error, which says what the call waited for, is the one raised."""
    budget = active_budget()
    if budget is None or budget.bound is None:
        return default
    return budget.bound + CANCEL_GRACE + 1.0


__all__ = ["CANCEL_GRACE", "CallBudget", "OnExpiry", "active_budget", "inner_wait_timeout"]
