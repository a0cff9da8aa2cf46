"""The worker's metrics: one table, from which the Prometheus registry and the OTel meter
make every instrument (adding a metric is one row here, plus the call that records it).

One naming rule for both: the Prometheus name is ``taskq_`` + the metric's
name, the OpenTelemetry instrument's is ``taskq.worker.`` + the same name
(the worker guide's ``taskq.worker.watchdog_trips_total`` is
``taskq_watchdog_trips_total`` on ``/metrics``). Units are in the names,
base units (seconds), ``_total`` on counters. Label values are bounded:
actor, queue, outcome, detector, loop, status, reason; never a job id.

docs/operations-reference.md, "Metrics", says what each means and which alerts to build
on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

Kind = Literal["counter", "histogram", "gauge"]

PROMETHEUS_PREFIX: Final = "taskq_"
OTEL_PREFIX: Final = "taskq.worker."

#: An attempt's duration: background jobs run from milliseconds to an hour.
ATTEMPT_BUCKETS: Final = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
    300.0, 600.0, 1800.0, 3600.0,
)  # fmt: skip
#: A claim's round trip: a millisecond on a healthy database, seconds when it struggles.
CLAIM_BUCKETS: Final = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
)  # fmt: skip
#: Jobs one claim returned: 0 is a poll that found nothing; at most 2 x max_concurrency.
BATCH_BUCKETS: Final = (0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0)
#: From the first shutdown signal to the worker's exit (default budget: 75 s).
SHUTDOWN_BUCKETS: Final = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 75.0, 120.0, 300.0)


@dataclass(frozen=True, slots=True)
class Metric:
    """One metric: its name (without prefix), kind, labels, unit and help text.

    ``hot``: updated per job or claim, only on the event loop, so Prometheus keeps it
    in lock-free cells (``hot_cells``) rather than ``prometheus_client``'s locked
    metrics. ``on_metrics`` false: on ``/metrics`` the health server's worker gauges
    (``gauges``) already say the same under this name, in the worker guide's words.
    """

    name: str
    kind: Kind
    labels: tuple[str, ...]
    help: str
    unit: str = ""
    buckets: tuple[float, ...] = ()
    hot: bool = False
    on_metrics: bool = True

    @property
    def prometheus(self) -> str:
        return PROMETHEUS_PREFIX + self.name

    @property
    def otel(self) -> str:
        return OTEL_PREFIX + self.name


_table: list[Metric] = []


def _row(
    name: str,
    kind: Kind,
    labels: tuple[str, ...],
    help: str,
    unit: str,
    buckets: tuple[float, ...] = (),
    *,
    hot: bool = False,
    on_metrics: bool = True,
) -> Metric:
    """A row of :data:`METRICS`: the metric, entered in the table."""
    metric = Metric(name, kind, labels, help, unit, buckets, hot, on_metrics)
    _table.append(metric)
    return metric


# fmt: off
# The job path's (hot: lock-free cells on Prometheus).
ATTEMPTS: Final = _row(
    "attempts_total", "counter", ("actor", "queue", "outcome"),
    "Attempts this worker ended, by outcome (succeeded, retried, snoozed, failed, cancelled, "
    "interrupted, abandoned).",
    "{attempt}", hot=True,
)
ATTEMPT_DURATION: Final = _row(
    "attempt_duration_seconds", "histogram", ("actor",),
    "How long attempts ran, from the consumer taking the job to its outcome.",
    "s", ATTEMPT_BUCKETS, hot=True,
)
CLAIM_DURATION: Final = _row(
    "claim_duration_seconds", "histogram", (),
    "Round-trip time of the producer's claims (with the terminal writes they carry).",
    "s", CLAIM_BUCKETS, hot=True,
)
CLAIM_BATCH: Final = _row(
    "claim_batch_jobs", "histogram", (),
    "Jobs each claim returned (0: the claim found nothing due).",
    "{job}", BATCH_BUCKETS, hot=True,
)
# Rare events, from any thread (a watchdog trip comes from the loop-lag thread).
HEARTBEAT_FAILURES: Final = _row(
    "heartbeat_failures_total", "counter", (),
    "Heartbeats that failed (timed out, or the database refused or was unreachable).",
    "{heartbeat}",
)
RATE_LIMIT_DENIALS: Final = _row(
    "rate_limit_denials_total", "counter", ("actor", "reason"),
    "Jobs snoozed before running because a rate or concurrency limit denied them.",
    "{job}",
)
WATCHDOG_TRIPS: Final = _row(
    "watchdog_trips_total", "counter", ("detector",),
    "Watchdog trips (each ends the process with exit code 2).",
    "{trip}",
)
SIBLING_CRASHES: Final = _row(
    "sibling_crashes_total", "counter", ("loop",),
    "Worker loops that raised (each stops the worker with exit code 1).",
    "{crash}",
)
SHUTDOWN_DURATION: Final = _row(
    "shutdown_duration_seconds", "histogram", (),
    "From the first shutdown signal to the worker's stop.",
    "s", SHUTDOWN_BUCKETS,
)
# Gauges, read at scrape (or collection) time: ``Readings.gauge``.
LOCAL_QUEUE: Final = _row(
    "local_queue_jobs", "gauge", (),
    "Jobs claimed by this worker and waiting in its local queue for a consumer.",
    "{job}",
)
LOOP_TICK_AGE: Final = _row(
    "loop_tick_age_seconds", "gauge", ("loop",),
    "Seconds since each interval-driven loop last ticked (the stale-loop detector's input).",
    "s",
)
QUEUE_JOBS: Final = _row(
    "queue_jobs", "gauge", ("queue", "status"),
    "Jobs per queue in each active status (pending, scheduled, running); reported by the "
    "leader only, sampled every 15 s.",
    "{job}",
)
QUEUE_OLDEST_PENDING_AGE: Final = _row(
    "queue_oldest_pending_age_seconds", "gauge", ("queue",),
    "How long the longest-waiting due pending job of each queue has been due; reported by "
    "the leader only.",
    "s",
)
# On /metrics the worker guide's taskq_active_jobs and taskq_is_leader (the health server's
# worker gauges) say the same.
ACTIVE_JOBS: Final = _row(
    "active_jobs", "gauge", (),
    "Jobs this worker's consumers hold now (in flight).",
    "{job}", on_metrics=False,
)
IS_LEADER: Final = _row(
    "is_leader", "gauge", (),
    "1 if this worker holds the maintenance leader lock.",
    "1", on_metrics=False,
)
# fmt: on

#: Every metric of the worker, one row each: both backends make theirs from it.
METRICS: Final = tuple(_table)

#: Why a rate or concurrency limit denied a job (``worker.limits.DenialReason``, pinned
#: equal by a test): each actor with limits has a denial series per reason from the start.
DENIAL_REASONS: Final = ("rate-limited", "reservation-unavailable", "rate-limiter-unavailable")
#: The statuses ``taskq_queue_jobs`` reports for each queue the leader has seen (0 when
#: none are in it, so a series never vanishes under an alert).
ACTIVE_STATUSES: Final = ("pending", "scheduled", "running")

#: What an ``outcome`` label can say (the attempt span's words).
OUTCOMES: Final = (
    "succeeded",
    "retried",
    "snoozed",
    "failed",
    "cancelled",
    "interrupted",
    "abandoned",
)

# OpenTelemetry attribute keys: the spans' where they say the same thing.
GROUP_ATTRIBUTE: Final = "messaging.consumer.group.name"
OTEL_LABELS: Final = {
    "actor": "messaging.taskq.actor",
    "queue": "messaging.destination.name",
    "outcome": "messaging.taskq.job.outcome",
    "detector": "taskq.watchdog.detector",
    "loop": "taskq.worker.loop",
    "status": "taskq.job.status",
    "reason": "taskq.rate_limit.reason",
}


def loop_label(loop: str) -> str:
    """The ``loop`` label of a sibling: ``consumer-17`` counts as ``consumer``, so the
    label has a handful of values however large ``TASKQ_MAX_CONCURRENCY`` is."""
    return "consumer" if loop.startswith("consumer-") else loop


__all__ = [
    "ACTIVE_JOBS",
    "ACTIVE_STATUSES",
    "ATTEMPTS",
    "ATTEMPT_DURATION",
    "CLAIM_BATCH",
    "CLAIM_DURATION",
    "DENIAL_REASONS",
    "GROUP_ATTRIBUTE",
    "HEARTBEAT_FAILURES",
    "IS_LEADER",
    "LOCAL_QUEUE",
    "LOOP_TICK_AGE",
    "METRICS",
    "OTEL_LABELS",
    "OUTCOMES",
    "QUEUE_JOBS",
    "QUEUE_OLDEST_PENDING_AGE",
    "RATE_LIMIT_DENIALS",
    "SHUTDOWN_DURATION",
    "SIBLING_CRASHES",
    "WATCHDOG_TRIPS",
    "Metric",
    "loop_label",
]
