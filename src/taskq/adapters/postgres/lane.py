"""A pooled connection kept across back-to-back statements: the pool's hops, paid once.

A pool acquire plus release costs about as much client time as the rest of a
single enqueue (asyncpg's release alone is a shielded task: two extra event
loop turns). Code that runs statement after statement (``enqueue`` in a loop,
a handle polling) keeps one connection in a :class:`Lane` instead, and hands
it back to the pool as soon as the event loop gets a turn in which nobody used
it. One caller at a time: while the lane is busy, others use the pool as before.

Only for statements that are their own transaction (autocommit): nothing
outlives a statement on the kept connection, so whoever comes next finds it
as the pool would have handed it over.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

C = TypeVar("C")
R = TypeVar("R")

_log = logging.getLogger(__name__)


class Lane(Generic[C]):
    """At most one kept connection; ``release`` gives it back to its pool."""

    def __init__(
        self,
        release: Callable[[C], Awaitable[None]],
        *,
        discard: Callable[[C, BaseException], Awaitable[None]] | None = None,
    ) -> None:
        self._release = release
        # After a failed statement: closes the connection first when the failure left it
        # unusable (the driver knows which), so the pool never hands it out again.
        self._discard = discard
        self._conn: C | None = None
        self._busy = False
        self._hand_back: asyncio.TimerHandle | None = None
        self._releasing: set[asyncio.Task[None]] = set()

    @property
    def busy(self) -> bool:
        return self._busy

    def take(self) -> C | None:
        """The kept connection, now busy; ``None`` when there is none or it is in use.

        After ``take`` (or :meth:`adopt`) the caller must call :meth:`keep` or
        :meth:`drop`.
        """
        if self._busy or self._conn is None:
            return None
        self._busy = True
        if self._hand_back is not None:
            self._hand_back.cancel()
            self._hand_back = None
        return self._conn

    def adopt(self) -> bool:
        """Reserve the lane for a connection the caller is about to acquire.

        False when it is busy, or when it already keeps a connection (the caller
        awaited something since its ``take``; adopting now would replace, and
        leak, the kept one).
        """
        if self._busy or self._conn is not None:
            return False
        self._busy = True
        return True

    def keep(self, conn: C) -> None:
        """The statement on ``conn`` finished cleanly: keep it until the loop goes idle."""
        self._busy = False
        if self._conn is not None and self._conn is not conn:
            self._start_release(conn)  # never two: the extra one goes straight back
        else:
            self._conn = conn
        if self._hand_back is None:
            # A due timer, not call_soon: run on the next turn all the same, but when the
            # next statement takes the connection first (back-to-back use) the cancelled
            # timer is dropped before the loop polls, where a cancelled ready callback
            # would cost a whole extra turn (a zero-timeout poll) per statement.
            self._hand_back = asyncio.get_running_loop().call_later(0, self._give_back)

    async def run(
        self,
        conn: C,
        work: Awaitable[R],
        translate: Callable[[BaseException], BaseException | None],
    ) -> R:
        """Await ``work`` (a statement on ``conn``, taken or adopted), then keep ``conn``.

        On failure ``conn`` goes back to its pool and the error is raised as
        ``translate`` maps it (itself when it maps to None).
        """
        try:
            result = await work
        except BaseException as exc:
            await self.drop(conn, exc)
            error = translate(exc) if isinstance(exc, Exception) else None
            if error is None:
                raise
            raise error from exc
        self.keep(conn)
        return result

    async def drop(self, conn: C | None, failure: BaseException | None = None) -> None:
        """The statement failed (or never got a connection): give ``conn`` back now
        (through ``discard`` when there is a ``failure``).

        A failure to give it back is swallowed: the caller's own error is what matters.
        """
        self._conn = None
        self._busy = False
        if self._hand_back is not None:
            self._hand_back.cancel()
            self._hand_back = None
        if conn is not None:
            if failure is not None and self._discard is not None:
                try:
                    await self._discard(conn, failure)
                except Exception:
                    _log.debug("could not discard a failed connection", exc_info=True)
            else:
                await self._release_quietly(conn)

    def _give_back(self) -> None:
        self._hand_back = None
        if self._conn is None or self._busy:
            return
        conn, self._conn = self._conn, None
        self._start_release(conn)

    def _start_release(self, conn: C) -> None:
        task = asyncio.get_running_loop().create_task(self._release_quietly(conn))
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)

    async def _release_quietly(self, conn: C) -> None:
        try:
            await self._release(conn)
        except Exception:  # the pool closed or the connection broke: it is gone either way
            _log.debug("could not hand a kept connection back to its pool", exc_info=True)


__all__ = ["Lane"]
