"""The worker's metrics on the memory adapter with a fake clock: the Prometheus registry
parsed back from its text, and the OpenTelemetry instruments read by the SDK's in-memory
reader."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel
from tests.metrics import MetricRecorder, histogram, metric_recording, number, scrape, value
from tests.unit.app.worker.harness import StoreProxy, WorkerRun, job, make_settings

from taskq import RateLimit
from taskq.adapters.memory import FakeClock, MemoryBackend
from taskq.app.actors import ActorRef, actor
from taskq.app.client import JobsClient
from taskq.app.context import JobContext
from taskq.domain.errors import StoreUnavailable
from taskq.domain.outcomes import Snooze
from taskq.domain.retry import RetryPolicy
from taskq.domain.status import JobStatus
from taskq.domain.watchdog import Detector, Trip
from taskq.ports.store_params import Heartbeat, HeartbeatReport

GROUP = "messaging.consumer.group.name"


class Item(BaseModel):
    n: int = 0


@actor
async def ok(payload: Item) -> int:
    return payload.n


@actor(retry=RetryPolicy(max_attempts=2, backoff="fixed", base=timedelta(seconds=1), jitter=0))
async def broken(payload: Item) -> None:
    raise ValueError(f"bad item {payload.n}")


@actor
async def sleepy(payload: Item) -> None:
    raise Snooze(timedelta(seconds=600))


@actor
async def waits(payload: Item, ctx: JobContext[Item]) -> None:
    await ctx.cancel_event.wait()


REFS: Sequence[ActorRef[Any, Any]] = (ok, broken, sleepy, waits)


@pytest.fixture
def meters() -> Iterator[MetricRecorder]:
    with metric_recording() as recorder:
        yield recorder


async def _worker(
    clock: FakeClock, backend: MemoryBackend, meters: MetricRecorder | None, **settings: Any
) -> WorkerRun:
    options: dict[str, Any] = {} if meters is None else {"meter_provider": meters.provider}
    run = WorkerRun(
        backend,
        clock,
        {ref.name: ref for ref in REFS},
        make_settings(**{"queues": ["default", "other"]} | settings),
        **options,
    )
    await run.start()
    return run


async def test_attempts_are_counted_by_actor_queue_and_outcome(
    clock: FakeClock, backend: MemoryBackend, meters: MetricRecorder
) -> None:
    """Each attempt adds exactly 1 to its (actor, queue, outcome) on /metrics and on the OTel
    counter (with TASKQ_WORKER_GROUP): succeeded, retried then failed, snoozed, cancelled;
    each attempt whose actor ran is one duration observation of its actor."""
    client = JobsClient(backend.store(), clock=clock)
    await client.enqueue(ok, {"n": 1})
    await client.enqueue(ok, {"n": 2}, queue="other")
    await client.enqueue(broken, {"n": 3})
    await client.enqueue(sleepy, {"n": 4})
    cancelled = await client.enqueue(waits, {"n": 5})
    run = await _worker(clock, backend, meters, worker_group="billing")
    await run.advance(1)
    await client.cancel(cancelled.job_id)
    await run.advance(30)
    assert (await job(run.store, cancelled.job_id)).status is JobStatus.CANCELLED

    samples = scrape(run.worker.metrics_registry)
    expected = {
        ("ok", "default", "succeeded"): 1,
        ("ok", "other", "succeeded"): 1,
        ("broken", "default", "retried"): 1,
        ("broken", "default", "failed"): 1,
        ("sleepy", "default", "snoozed"): 1,
        ("waits", "default", "cancelled"): 1,
        ("ok", "default", "failed"): 0,  # made at start, at 0, for rate()
    }
    for (actor_name, queue, outcome), count in expected.items():
        got = value(samples, "taskq_attempts_total", actor=actor_name, queue=queue, outcome=outcome)
        assert got == count, (actor_name, queue, outcome)
    assert value(samples, "taskq_attempt_duration_seconds_count", actor="ok") == 2
    assert value(samples, "taskq_attempt_duration_seconds_count", actor="broken") == 2

    points = meters.points()
    otel = {
        (
            attrs["messaging.taskq.actor"],
            attrs["messaging.destination.name"],
            attrs["messaging.taskq.job.outcome"],
        ): number(point)
        for attrs, point in points["taskq.worker.attempts_total"]
    }
    assert otel == {key: count for key, count in expected.items() if count}
    assert {attrs[GROUP] for attrs, _ in points["taskq.worker.attempts_total"]} == {"billing"}
    durations = {
        attrs["messaging.taskq.actor"]: histogram(point).count
        for attrs, point in points["taskq.worker.attempt_duration_seconds"]
    }
    assert durations["ok"] == 2
    assert durations["broken"] == 2
    assert await run.stop() == 0


async def test_claims_are_timed_and_their_batch_sizes_observed(
    clock: FakeClock, backend: MemoryBackend, meters: MetricRecorder
) -> None:
    """Every claim is one observation of its round trip and one of how many jobs it
    returned: the batch sizes add up to the jobs run."""
    client = JobsClient(backend.store(), clock=clock)
    for n in range(5):
        await client.enqueue(ok, {"n": n})
    run = await _worker(clock, backend, meters)
    await run.advance(3)
    samples = scrape(run.worker.metrics_registry)
    claims = value(samples, "taskq_claim_duration_seconds_count")
    assert claims is not None
    assert claims >= 1
    assert value(samples, "taskq_claim_batch_jobs_count") == claims
    assert value(samples, "taskq_claim_batch_jobs_sum") == 5
    [(attrs, point)] = meters.points()["taskq.worker.claim_batch_jobs"]
    assert histogram(point).sum == 5
    assert attrs == {GROUP: "default"}
    assert await run.stop() == 0


class FailingBeats(StoreProxy):
    """A store whose heartbeats fail while ``failing``."""

    failing = True

    async def heartbeat(self, beat: Heartbeat) -> HeartbeatReport:
        if self.failing:
            raise StoreUnavailable("the database is unreachable")
        report: HeartbeatReport = await self._inner.heartbeat(beat)
        return report


async def test_each_failed_heartbeat_is_counted(
    clock: FakeClock, backend: MemoryBackend, meters: MetricRecorder
) -> None:
    """A heartbeat that fails adds 1 to taskq_heartbeat_failures_total; one that works adds
    nothing."""
    store = FailingBeats(backend.store())
    run = WorkerRun(
        backend,
        clock,
        {ref.name: ref for ref in REFS},
        make_settings(heartbeat_interval=10, max_heartbeat_failures=5),
        store=store,
        meter_provider=meters.provider,
    )
    await run.start()
    await run.advance(25)  # beats at 10 and 20 fail
    store.failing = False
    await run.advance(10)  # the beat at 30 works
    samples = scrape(run.worker.metrics_registry)
    assert value(samples, "taskq_heartbeat_failures_total") == 2
    [(_, point)] = meters.points()["taskq.worker.heartbeat_failures_total"]
    assert number(point) == 2
    assert await run.stop() == 0


async def test_the_leader_reports_queue_depths_and_the_oldest_pending_age(
    clock: FakeClock, backend: MemoryBackend, meters: MetricRecorder
) -> None:
    """The leader's sample (at election, then every 15 s) is what the queue gauges report
    at scrape time: counts by queue and active status, and how long each queue's oldest
    due pending job has waited; a worker that stops leading reports none."""
    client = JobsClient(backend.store(), clock=clock)
    await client.enqueue(ok, {"n": 1}, queue="unserved")
    await clock.advance_async(5)
    await client.enqueue(ok, {"n": 2}, queue="unserved")
    await client.enqueue(
        ok, {"n": 3}, queue="unserved", scheduled_at=clock.now() + timedelta(hours=1)
    )
    run = await _worker(clock, backend, meters)
    await run.advance(16)  # elected at start, sampled then and 15 s later
    assert run.state.leadership.is_leader
    samples = scrape(run.worker.metrics_registry)
    assert value(samples, "taskq_queue_jobs", queue="unserved", status="pending") == 2
    assert value(samples, "taskq_queue_jobs", queue="unserved", status="scheduled") == 1
    assert value(samples, "taskq_queue_oldest_pending_age_seconds", queue="unserved") == 21
    points = meters.points()
    depths = {
        (attrs["messaging.destination.name"], attrs["taskq.job.status"]): number(point)
        for attrs, point in points["taskq.worker.queue_jobs"]
    }
    # Running has no jobs: 0, not missing (a series must not vanish under an alert).
    assert depths == {
        ("unserved", "pending"): 2,
        ("unserved", "scheduled"): 1,
        ("unserved", "running"): 0,
    }
    [(_, age)] = points["taskq.worker.queue_oldest_pending_age_seconds"]
    assert number(age) == 21
    [(_, leader)] = points["taskq.worker.is_leader"]
    assert number(leader) == 1

    assert await run.stop() == 0
    after = scrape(run.worker.metrics_registry)
    assert value(after, "taskq_queue_jobs", queue="unserved", status="pending") is None


async def test_the_gauges_read_the_worker_at_scrape_time(
    clock: FakeClock, backend: MemoryBackend, meters: MetricRecorder
) -> None:
    """Local-queue depth, loop tick ages and jobs in flight are read when scraped."""
    client = JobsClient(backend.store(), clock=clock)
    await client.enqueue(waits, {"n": 1})
    run = await _worker(clock, backend, meters)
    await run.advance(1)
    samples = scrape(run.worker.metrics_registry)
    assert value(samples, "taskq_local_queue_jobs") == 0
    assert value(samples, "taskq_loop_tick_age_seconds", loop="producer") is not None
    points = meters.points()
    [(_, active)] = points["taskq.worker.active_jobs"]
    assert number(active) == 1
    loops = {
        attrs["taskq.worker.loop"] for attrs, _ in points["taskq.worker.loop_tick_age_seconds"]
    }
    assert "producer" in loops
    assert await run.stop() == 0
    samples = scrape(run.worker.metrics_registry)
    assert (
        value(
            samples, "taskq_attempts_total", actor="waits", queue="default", outcome="interrupted"
        )
        == 1
    )
    assert value(samples, "taskq_shutdown_duration_seconds_count") == 1


async def test_with_otel_disabled_no_instrument_is_made(
    clock: FakeClock, backend: MemoryBackend, meters: MetricRecorder
) -> None:
    """TASKQ_OTEL_ENABLED=false: the worker never asks the meter provider for a meter, so
    the SDK's reader collects nothing; /metrics still counts."""
    client = JobsClient(backend.store(), clock=clock)
    await client.enqueue(ok, {"n": 1})
    run = await _worker(clock, backend, meters, otel_enabled=False)
    await run.advance(2)
    assert run.worker.metrics.otel is None
    assert meters.points() == {}
    samples = scrape(run.worker.metrics_registry)
    assert (
        value(samples, "taskq_attempts_total", actor="ok", queue="default", outcome="succeeded")
        == 1
    )
    assert await run.stop() == 0


async def test_with_no_sdk_configured_no_instrument_is_made(
    clock: FakeClock, backend: MemoryBackend
) -> None:
    """No meter provider given and none set globally (the API's proxy): no OTel instruments,
    so no call per job."""
    client = JobsClient(backend.store(), clock=clock)
    await client.enqueue(ok, {"n": 1})
    run = await _worker(clock, backend, None)
    await run.advance(2)
    assert run.worker.metrics.otel is None
    assert await run.stop() == 0


async def test_trips_crashes_and_broken_contracts_are_counted(
    clock: FakeClock, backend: MemoryBackend, meters: MetricRecorder
) -> None:
    """A watchdog trip counts under its detector, a sibling that raises under its loop, and
    one that returns early as a sibling_contract trip; the four detectors start at 0."""
    run = await _worker(clock, backend, meters)
    before = scrape(run.worker.metrics_registry)
    assert value(before, "taskq_watchdog_trips_total", detector="loop_lag") == 0

    async def crashes() -> None:
        raise ValueError("boom")

    async def returns_at_once() -> None:
        return None

    with pytest.raises(RuntimeError, match="returned while no shutdown"):
        await run.worker._guard("rogue", returns_at_once)
    with pytest.raises(ValueError, match="boom"):
        await run.worker._guard("listener", crashes)
    await run.worker._on_trip(Trip(Detector.STALE_LOOP, "test"))
    assert await run.finish(within=5) == 1

    samples = scrape(run.worker.metrics_registry)
    assert value(samples, "taskq_sibling_crashes_total", loop="listener") == 1
    assert value(samples, "taskq_watchdog_trips_total", detector="stale_loop") == 1
    assert value(samples, "taskq_watchdog_trips_total", detector="sibling_contract") == 1
    assert value(samples, "taskq_watchdog_trips_total", detector="loop_lag") == 0
    points = meters.points()
    trips = {
        attrs["taskq.watchdog.detector"]: number(point)
        for attrs, point in points["taskq.worker.watchdog_trips_total"]
    }
    assert trips == {"stale_loop": 1, "sibling_contract": 1}
    [(attrs, crash)] = points["taskq.worker.sibling_crashes_total"]
    assert attrs == {"taskq.worker.loop": "listener", GROUP: "default"}
    assert number(crash) == 1


@actor(rate_limits=[RateLimit("k", limit=1, per=timedelta(seconds=60))])
async def rated(payload: Item) -> int:
    return payload.n


async def test_rate_limit_denials_are_counted_by_actor_and_reason(
    clock: FakeClock, backend: MemoryBackend, meters: MetricRecorder
) -> None:
    """A job a rate limit denies adds 1 to taskq_rate_limit_denials_total{actor, reason} and
    ends its attempt as snoozed, with no duration (its actor never ran)."""
    client = JobsClient(backend.store(), clock=clock)
    await client.enqueue(rated, {"n": 1})
    await client.enqueue(rated, {"n": 2})
    run = WorkerRun(
        backend, clock, {"rated": rated}, make_settings(), meter_provider=meters.provider
    )
    await run.start()
    await run.advance(1)
    samples = scrape(run.worker.metrics_registry)
    assert (
        value(samples, "taskq_rate_limit_denials_total", actor="rated", reason="rate-limited") == 1
    )
    assert (
        value(samples, "taskq_attempts_total", actor="rated", queue="default", outcome="snoozed")
        == 1
    )
    assert value(samples, "taskq_attempt_duration_seconds_count", actor="rated") == 1
    [(attrs, point)] = meters.points()["taskq.worker.rate_limit_denials_total"]
    assert attrs == {
        "messaging.taskq.actor": "rated",
        "taskq.rate_limit.reason": "rate-limited",
        GROUP: "default",
    }
    assert number(point) == 1
    assert await run.stop() == 0


async def test_denial_and_crash_series_exist_at_zero_before_the_first(
    clock: FakeClock, backend: MemoryBackend
) -> None:
    """increase() misses the first event of a series that appears with it: each actor with
    limits has a denial series per reason, and each loop a crash series, from the start;
    the consumers share one (``consumer``), so the label stays bounded."""
    run = WorkerRun(backend, clock, {"rated": rated, "ok": ok}, make_settings(max_concurrency=3))
    await run.start()
    await run.advance(1)
    samples = scrape(run.worker.metrics_registry)
    for reason in ("rate-limited", "reservation-unavailable", "rate-limiter-unavailable"):
        assert value(samples, "taskq_rate_limit_denials_total", actor="rated", reason=reason) == 0
        assert value(samples, "taskq_rate_limit_denials_total", actor="ok", reason=reason) is None
    loops = {
        dict(labels)["loop"] for name, labels in samples if name == "taskq_sibling_crashes_total"
    }
    assert loops == {"shutdown", "heartbeat", "listener", "leader", "consumer", "producer"}
    assert all(value(samples, "taskq_sibling_crashes_total", loop=loop) == 0 for loop in loops)
    assert await run.stop() == 0


def test_the_denial_reasons_are_the_limiters() -> None:
    """The pre-made denial series cover every reason the limiter gives."""
    from typing import get_args

    from taskq.app.observability.metric_names import DENIAL_REASONS
    from taskq.app.worker.limits import DenialReason

    assert set(DENIAL_REASONS) == set(get_args(DenialReason))


class CrashingBeats(StoreProxy):
    """A store whose heartbeat raises a bug's error: the heartbeat loop crashes."""

    async def heartbeat(self, beat: Heartbeat) -> HeartbeatReport:
        raise RuntimeError("a bug in a custom store")


async def test_an_attempt_cut_off_by_a_crash_is_counted_once_as_interrupted(
    clock: FakeClock, backend: MemoryBackend, meters: MetricRecorder
) -> None:
    """A sibling crash stops the worker while an attempt runs: the attempt counts exactly
    once, as interrupted, and the crash once under its loop."""
    client = JobsClient(backend.store(), clock=clock)
    await client.enqueue(waits, {"n": 1})
    run = WorkerRun(
        backend,
        clock,
        {ref.name: ref for ref in REFS},
        make_settings(heartbeat_interval=10),
        store=CrashingBeats(backend.store()),
        meter_provider=meters.provider,
    )
    await run.start()
    assert await run.finish(within=30) == 1
    samples = scrape(run.worker.metrics_registry)
    interrupted = value(
        samples, "taskq_attempts_total", actor="waits", queue="default", outcome="interrupted"
    )
    assert interrupted == 1
    assert value(samples, "taskq_sibling_crashes_total", loop="heartbeat") == 1
