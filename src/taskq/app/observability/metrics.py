"""The worker's metrics recorder: what the runtime calls as things happen.

One :class:`WorkerMetrics` per worker records each event twice, on the
Prometheus registry it was given (``/metrics``) and on OpenTelemetry
instruments when an SDK is configured. The job path costs one dict lookup,
one integer add and one bucket bisect per attempt, with no lock (the job
path's series are loop-only cells, ``hot_cells``): the series and the OTel
attribute sets are made once per (actor, queue, outcome), never per job.
With ``TASKQ_OTEL_ENABLED=false`` no meter is ever asked for; with no SDK,
the recorder looks again at most once a second (on a claim, not on a job),
so an SDK set after the worker started is used.

Gauges are read at scrape time (``readings``). The runtime hands this module
nothing but plain values and a :class:`~taskq.app.observability.readings.WorkerView`:
observability never imports the worker.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from opentelemetry.metrics import MeterProvider
from prometheus_client import CollectorRegistry

from taskq.app.observability import metric_names as m
from taskq.app.observability.hot_cells import CountCell, HistogramCell
from taskq.app.observability.otel_metrics import OtelMeters, resolve_meter
from taskq.app.observability.prometheus_metrics import PrometheusMetrics
from taskq.app.observability.readings import Readings, WorkerView
from taskq.ports.store_params import QueueDepth

#: While no SDK is configured, how often (seconds) the recorder looks again whether one is.
LOOK_AGAIN_EVERY: Final = 1.0
#: The watchdog's detectors and the worker's long-lived loops: their counters start at 0
#: (an alert on ``increase()`` needs the series to exist before the first trip).
DETECTORS: Final = ("shutdown_deadline", "stale_loop", "sibling_contract", "loop_lag")


@dataclass(frozen=True, slots=True)
class _AttemptMeters:
    """One (actor, queue, outcome)'s Prometheus children and OTel attributes."""

    count: CountCell
    duration: HistogramCell
    attributes: dict[str, str]
    duration_attributes: dict[str, str]


class WorkerMetrics:
    """Records the worker's metrics on ``registry`` and, when enabled, on OpenTelemetry.

    ``otel_enabled`` is ``TASKQ_OTEL_ENABLED``; ``group`` is
    ``TASKQ_WORKER_GROUP`` (an attribute of every OTel measurement);
    ``meter_provider`` replaces the global one.
    """

    __slots__ = (
        "_attempts",
        "_claim_batch",
        "_claim_duration",
        "_group",
        "_next_look",
        "_otel",
        "_otel_enabled",
        "_prom",
        "_provider",
        "readings",
        "registry",
    )

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        otel_enabled: bool,
        group: str,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        self.registry = registry
        self.readings = Readings()
        self._prom = PrometheusMetrics(registry, self.readings)
        self._group = group
        self._otel_enabled = otel_enabled
        self._provider = meter_provider
        self._otel: OtelMeters | None = None
        self._next_look = 0.0
        self._attempts: dict[tuple[str, str, str], _AttemptMeters] = {}
        self._claim_duration = self._prom.histogram_cells(m.CLAIM_DURATION).cell()
        self._claim_batch = self._prom.histogram_cells(m.CLAIM_BATCH).cell()
        for detector in DETECTORS:
            self._prom.counter(m.WATCHDOG_TRIPS).labels(detector)
        self.look_for_sdk()

    def __repr__(self) -> str:
        return f"<WorkerMetrics otel={'on' if self._otel is not None else 'off'}>"

    @property
    def otel(self) -> OtelMeters | None:
        """The OTel instruments, or None (disabled, or no SDK found yet)."""
        return self._otel

    def look_for_sdk(self) -> None:
        """Create the OTel instruments once an SDK is configured (looked at most once a
        second; called per claim, so never per job)."""
        if self._otel is not None or not self._otel_enabled:
            return
        now = time.monotonic()
        if now < self._next_look:
            return
        self._next_look = now + LOOK_AGAIN_EVERY
        meter = resolve_meter(self._provider)
        if meter is not None:
            self._otel = OtelMeters(meter, self.readings, self._group)

    def watch(self, view: WorkerView) -> None:
        """Read the gauges from ``view`` from now on."""
        self.readings.view = view

    def prepare(self, actors: Iterable[tuple[str, str]]) -> None:
        """Make every outcome's series of each (actor, queue) now, at 0: a rate() over a
        counter that appears at its first increment misses that increment."""
        for actor, queue in actors:
            for outcome in m.OUTCOMES:
                self._attempt_meters(actor, queue, outcome)

    def prepare_denials(self, actors: Iterable[str]) -> None:
        """Each reason's denial series of each actor with limits, at 0 (actors x 3)."""
        for actor in actors:
            for reason in m.DENIAL_REASONS:
                self._prom.counter(m.RATE_LIMIT_DENIALS).labels(actor, reason)

    def prepare_loops(self, loops: Iterable[str]) -> None:
        """The crash series of each of the worker's loops, at 0 (the consumers as one)."""
        for loop in loops:
            self._prom.counter(m.SIBLING_CRASHES).labels(m.loop_label(loop))

    # -- the job path ----------------------------------------------------------------------

    def attempt_ended(self, actor: str, queue: str, outcome: str, seconds: float | None) -> None:
        """An attempt of ``actor`` on ``queue`` ended with ``outcome`` after ``seconds``
        (None: its actor never ran, e.g. an invalid payload or a rate-limit denial)."""
        meters = self._attempts.get((actor, queue, outcome))
        if meters is None:
            meters = self._attempt_meters(actor, queue, outcome)
        meters.count.value += 1
        if seconds is not None:
            meters.duration.observe(seconds)
        otel = self._otel
        if otel is not None:
            otel.counter(m.ATTEMPTS).add(1, meters.attributes)
            if seconds is not None:
                otel.histogram(m.ATTEMPT_DURATION).record(seconds, meters.duration_attributes)

    def claimed(self, seconds: float, jobs: int) -> None:
        """A claim round trip took ``seconds`` and returned ``jobs``."""
        self._claim_duration.observe(seconds)
        self._claim_batch.observe(jobs)
        otel = self._otel
        if otel is None:
            self.look_for_sdk()
            otel = self._otel
        if otel is not None:
            attributes = {m.GROUP_ATTRIBUTE: self._group}
            otel.histogram(m.CLAIM_DURATION).record(seconds, attributes)
            otel.histogram(m.CLAIM_BATCH).record(jobs, attributes)

    def _attempt_meters(self, actor: str, queue: str, outcome: str) -> _AttemptMeters:
        prom = self._prom
        group = self._group
        meters = _AttemptMeters(
            count=prom.counter_cells(m.ATTEMPTS).cell(actor, queue, outcome),
            duration=prom.histogram_cells(m.ATTEMPT_DURATION).cell(actor),
            attributes={
                m.OTEL_LABELS["actor"]: actor,
                m.OTEL_LABELS["queue"]: queue,
                m.OTEL_LABELS["outcome"]: outcome,
                m.GROUP_ATTRIBUTE: group,
            },
            duration_attributes={m.OTEL_LABELS["actor"]: actor, m.GROUP_ATTRIBUTE: group},
        )
        self._attempts[actor, queue, outcome] = meters
        return meters

    # -- the rest: rare events -------------------------------------------------------------

    def heartbeat_failed(self) -> None:
        self._prom.counter(m.HEARTBEAT_FAILURES).inc()
        if self._otel is not None:
            self._otel.counter(m.HEARTBEAT_FAILURES).add(1, self._otel.attributes())

    def rate_limit_denied(self, actor: str, reason: str) -> None:
        self._prom.counter(m.RATE_LIMIT_DENIALS).labels(actor, reason).inc()
        if self._otel is not None:
            self._otel.counter(m.RATE_LIMIT_DENIALS).add(
                1, self._otel.attributes(actor=actor, reason=reason)
            )

    def watchdog_tripped(self, detector: str) -> None:
        """A trip (from any thread): counted, then the process ends; see :meth:`flush`."""
        self._prom.counter(m.WATCHDOG_TRIPS).labels(detector).inc()
        if self._otel is not None:
            self._otel.counter(m.WATCHDOG_TRIPS).add(1, self._otel.attributes(detector=detector))

    def sibling_crashed(self, loop: str) -> None:
        label = m.loop_label(loop)
        self._prom.counter(m.SIBLING_CRASHES).labels(label).inc()
        if self._otel is not None:
            self._otel.counter(m.SIBLING_CRASHES).add(1, self._otel.attributes(loop=label))

    def shutdown_took(self, seconds: float) -> None:
        self._prom.histogram(m.SHUTDOWN_DURATION).observe(seconds)
        if self._otel is not None:
            self._otel.histogram(m.SHUTDOWN_DURATION).record(seconds, self._otel.attributes())

    def queue_depths_sampled(self, depths: Sequence[QueueDepth]) -> None:
        """The leader's latest sample: the queue gauges report it until the next one."""
        self.readings.depths_sampled(depths)

    def queue_depths_cleared(self) -> None:
        """Leadership ended: this worker reports no queue depths any more."""
        self.readings.depths_cleared()

    def flush(self, timeout: float) -> None:
        """Push what the OTel SDK holds now, within ``timeout`` seconds: before an
        ``os._exit`` (a watchdog trip), which skips the SDK's own flush at exit."""
        if self._otel is None:
            return
        provider = self._provider
        if provider is None:
            from opentelemetry import metrics

            provider = metrics.get_meter_provider()
        force_flush = getattr(provider, "force_flush", None)
        if force_flush is not None:
            # An exporter's failure must not stop the exit.
            with contextlib.suppress(Exception):
                force_flush(timeout_millis=int(timeout * 1000))


def new_metrics_registry() -> CollectorRegistry:
    """A registry of its own for one worker (never the process-global default one, so two
    workers in one process, or a test's, never collide)."""
    return CollectorRegistry(auto_describe=True)


__all__ = ["DETECTORS", "WorkerMetrics", "new_metrics_registry"]
