"""CallBudget: one bound per store call, raised as what the call was waiting for."""

from __future__ import annotations

import asyncio
import time

import pytest

from taskq.adapters.postgres.call_budget import (
    CANCEL_GRACE,
    CallBudget,
    active_budget,
)
from taskq.domain.errors import PoolWaitTimeout, ServerAnswerTimeout, StoreTimeout

BOUND = 0.05


async def _bounded_sleep(bound: float, seconds: float) -> None:
    async with CallBudget(bound):
        await asyncio.sleep(seconds)


async def test_a_call_past_its_bound_raises_server_answer_timeout() -> None:
    """A block still waiting at the deadline is cancelled and raises ServerAnswerTimeout
    naming the bound, about when the bound runs out."""
    started = time.monotonic()
    with pytest.raises(ServerAnswerTimeout, match=r"did not answer within 0\.05 s") as info:
        await _bounded_sleep(BOUND, 10)
    assert BOUND <= time.monotonic() - started < BOUND + 0.4
    assert info.value.waited_for == "the server's answer"
    assert isinstance(info.value.__cause__, asyncio.CancelledError)
    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0  # no cancel of its own is left on the task


async def test_what_the_call_waits_for_names_the_error() -> None:
    """While the block waits for a pool connection (on_expiry set), the deadline raises
    that wait's error instead."""

    async def waiting_for_the_pool() -> None:
        async with CallBudget(BOUND):
            budget = active_budget()
            assert budget is not None
            budget.on_expiry = lambda bound: PoolWaitTimeout(bound, "test pool")
            await asyncio.sleep(10)

    with pytest.raises(PoolWaitTimeout, match=r"within 0\.05 s: test pool"):
        await waiting_for_the_pool()


async def test_a_call_that_ends_in_time_is_left_alone() -> None:
    """A block that finishes before the deadline returns normally, and no cancel reaches
    the task afterwards."""
    async with CallBudget(1.0):
        await asyncio.sleep(0)
    await asyncio.sleep(0.05)
    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0


async def test_budgets_nest_into_one_bound() -> None:
    """An inner budget inside an outer one of the same task adds no deadline: the outer
    one ends the whole call."""

    async def three_statements() -> None:
        async with CallBudget(BOUND):
            for _ in range(3):
                await _bounded_sleep(BOUND, 0.03)

    started = time.monotonic()
    with pytest.raises(ServerAnswerTimeout, match=r"within 0\.05 s"):
        await three_statements()
    assert time.monotonic() - started < 0.08


async def test_a_call_that_ignores_the_first_cancel_is_cancelled_again() -> None:
    """A driver busy with its own cleanup after the deadline's cancel (psycopg asking a
    dead server to cancel) gets a second cancel CANCEL_GRACE later."""

    async def stubborn_statement() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            await asyncio.sleep(10)  # "asking the server to cancel"
            raise

    async def call() -> None:
        async with CallBudget(BOUND):
            await stubborn_statement()

    started = time.monotonic()
    with pytest.raises(StoreTimeout):
        await call()
    took = time.monotonic() - started
    assert BOUND + CANCEL_GRACE <= took < BOUND + CANCEL_GRACE + 0.4


async def test_a_cancel_from_outside_stays_a_cancel() -> None:
    """Cancelling the caller's task during a call is a cancel, not a timeout."""
    entered = asyncio.Event()

    async def call() -> None:
        async with CallBudget(5.0):
            entered.set()
            await asyncio.sleep(10)

    task = asyncio.create_task(call())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_budget_belongs_to_the_task_that_opened_it() -> None:
    """Work a call hands to another task is not inside the call's budget (it is bounded
    on its own), so that task's waits cannot change what the call reports."""
    seen: list[CallBudget | None] = []

    async def background() -> None:
        seen.append(active_budget())

    async with CallBudget(1.0):
        assert active_budget() is not None
        await asyncio.create_task(background())
    assert seen == [None]
    assert active_budget() is None


async def test_no_bound_bounds_nothing() -> None:
    """CallBudget(None) is a no-op: no deadline, no budget in force."""
    async with CallBudget(None):
        assert active_budget() is None
        await asyncio.sleep(0.01)
