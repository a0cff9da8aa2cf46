"""The Postgres store's wake gate: one wake-up in flight per queue, none owed left unsent.

An owed wake-up must be *started* after the commit that owes it (so the
workers receive it after the job is visible): the sends here are recorded
with what was owed when each one started.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from taskq.adapters.postgres.store.wake_gate import WakeGate


class Sends:
    """A send that waits until the test releases it, recording each start."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.release = asyncio.Event()
        self.fail = False

    async def __call__(self, queue: str) -> None:
        self.started.append(queue)
        await self.release.wait()
        if self.fail:
            raise ConnectionError("server closed the connection")


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_an_enqueue_with_none_in_flight_carries_the_wake_up() -> None:
    sends = Sends()
    gate = WakeGate(sends)
    assert gate.carries("q")
    gate.done("q", carried=True, wrote=True)
    assert gate.carries("q")  # nothing in flight again
    gate.done("q", carried=True, wrote=True)
    await settle()
    assert sends.started == []


async def test_enqueues_beside_a_carrier_owe_one_wake_up_sent_after_it() -> None:
    sends = Sends()
    gate = WakeGate(sends)
    assert gate.carries("q")
    assert not gate.carries("q")
    assert not gate.carries("q")
    gate.done("q", carried=False, wrote=True)
    gate.done("q", carried=False, wrote=True)
    await settle()
    assert sends.started == []  # the carrier is still in flight
    gate.done("q", carried=True, wrote=True)
    await settle()
    assert sends.started == ["q"]  # one for both
    sends.release.set()
    await gate.aclose()
    assert sends.started == ["q"]


async def test_a_commit_during_a_wake_up_in_flight_gets_another_after_it() -> None:
    """The wake-up in flight may have been delivered before that commit: it cannot count."""
    sends = Sends()
    gate = WakeGate(sends)
    assert gate.carries("q")
    assert not gate.carries("q")
    gate.done("q", carried=True, wrote=True)
    gate.done("q", carried=False, wrote=True)
    await settle()
    assert sends.started == ["q"]
    assert not gate.carries("q")  # the owed one is in flight
    gate.done("q", carried=False, wrote=True)
    await settle()
    assert sends.started == ["q"]
    sends.release.set()
    await gate.aclose()
    assert sends.started == ["q", "q"]


async def test_a_statement_that_wrote_nothing_owes_nothing() -> None:
    sends = Sends()
    gate = WakeGate(sends)
    assert gate.carries("q")
    assert not gate.carries("q")
    gate.done("q", carried=False, wrote=False)
    gate.done("q", carried=True, wrote=True)
    await gate.aclose()
    assert sends.started == []


async def test_queues_are_gated_apart() -> None:
    sends = Sends()
    gate = WakeGate(sends)
    assert gate.carries("a")
    assert gate.carries("b")
    assert not gate.carries("a")
    gate.done("a", carried=False, wrote=True)
    gate.done("b", carried=True, wrote=True)
    await settle()
    assert sends.started == []
    gate.done("a", carried=True, wrote=True)
    sends.release.set()
    await gate.aclose()
    assert sends.started == ["a"]


async def test_a_failed_wake_up_is_logged_and_the_queue_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sends = Sends()
    sends.fail = True
    sends.release.set()
    gate = WakeGate(sends)
    assert gate.carries("q")
    assert not gate.carries("q")
    gate.done("q", carried=False, wrote=True)
    with caplog.at_level(logging.WARNING, logger="taskq.notify"):
        gate.done("q", carried=True, wrote=True)
        await gate.aclose()
    assert sends.started == ["q"]
    assert "wake-up for queue 'q' not sent (ConnectionError: server closed the connection)" in (
        caplog.text
    )
    assert gate.carries("q")  # not stuck in flight


async def test_close_waits_for_the_wake_ups_in_flight() -> None:
    sends = Sends()
    gate = WakeGate(sends)
    assert gate.carries("q")
    assert not gate.carries("q")
    gate.done("q", carried=False, wrote=True)
    gate.done("q", carried=True, wrote=True)
    await settle()
    closing = asyncio.ensure_future(gate.aclose())
    await settle()
    assert not closing.done()
    sends.release.set()
    await asyncio.wait_for(closing, 1)
