"""Lane: one kept connection for back-to-back statements, handed back when the loop goes idle."""

from __future__ import annotations

import asyncio

from taskq.adapters.postgres.lane import Lane


async def test_back_to_back_use_keeps_one_connection_then_hands_it_back() -> None:
    """A connection kept after a statement is reused at once, and released on an idle turn."""
    released: list[str] = []

    async def release(conn: str) -> None:
        released.append(conn)

    lane: Lane[str] = Lane(release)
    assert lane.take() is None
    assert lane.adopt()
    lane.keep("c1")
    assert lane.take() == "c1"  # no loop turn in between: still kept
    assert lane.busy
    assert not lane.adopt()
    lane.keep("c1")
    await asyncio.sleep(0)  # the idle turn hands it back (after this task's step)
    await asyncio.sleep(0)
    await asyncio.sleep(0)  # the release task it started has run
    assert released == ["c1"]
    assert lane.take() is None


async def test_a_failed_statement_gives_the_connection_back_now() -> None:
    """drop releases at once, swallowing a release failure, and frees the lane."""
    released: list[str] = []

    async def release(conn: str) -> None:
        released.append(conn)
        raise RuntimeError("pool closed")

    lane: Lane[str] = Lane(release)
    assert lane.adopt()
    await lane.drop("c1")
    assert released == ["c1"]
    assert not lane.busy
    assert lane.take() is None


async def test_a_caller_that_waited_never_replaces_the_kept_connection() -> None:
    """Found busy, the caller awaits its pool; if the holder kept its connection
    meanwhile, adopting now would replace it and leak it: adopt refuses, and a keep of
    a second connection sends that one straight back to its pool."""
    released: list[str] = []

    async def release(conn: str) -> None:
        released.append(conn)

    lane: Lane[str] = Lane(release)
    assert lane.adopt()
    lane.keep("c1")
    assert lane.take() == "c1"  # the holder's next statement
    assert lane.take() is None  # another caller finds it busy, goes to its pool...
    lane.keep("c1")  # ...and meanwhile the holder is done
    assert not lane.adopt()  # the waiting caller must not take over the lane
    assert lane.take() == "c1"
    lane.keep("c2")  # a second connection is never kept beside the first
    await asyncio.sleep(0)
    assert released == ["c2"]
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert released == ["c2", "c1"]  # the kept one goes back on an idle turn
