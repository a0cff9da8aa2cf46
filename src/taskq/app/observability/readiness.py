"""``/ready``'s verdict: the body and whether it is 200 or 503 (pure, no I/O).

Each cause of a 503 adds one code to ``reasons`` (docs/operations-reference.md,
"Why /ready is 503", says what each means and what to do):

- ``starting``: the worker has not started its siblings yet;
- ``unresponsive``: the worker's event loop did not run a posted callback in
  time (``/live``'s check): it is blocked, so the ping was never tried
  (``pg_ping`` is ``loop_blocked``) and Postgres is not blamed;
- ``shutting_down``: a shutdown is in progress (``shutdown_phase`` says which phase);
- ``stale_loops``: a loop stopped ticking (``stale_loops`` names them);
- ``pg_ping_timeout`` / ``pg_ping_failed``: ``SELECT 1`` through the worker's
  pool did not answer within ``TASKQ_HEALTH_PG_PING_TIMEOUT`` or failed
  (``pg_ping_error`` says how).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from taskq.app.observability.health_view import WorkerSnapshot

STARTING: Final = "starting"
UNRESPONSIVE: Final = "unresponsive"
SHUTTING_DOWN: Final = "shutting_down"
STALE_LOOPS: Final = "stale_loops"
PG_PING_TIMEOUT: Final = "pg_ping_timeout"
PG_PING_FAILED: Final = "pg_ping_failed"


@dataclass(frozen=True, slots=True)
class PingResult:
    """How the readiness ping went: ``ok``, ``timeout``, ``failed`` (with the error),
    ``skipped`` (not tried: the worker is shutting down) or ``loop_blocked`` (posted,
    but the worker's loop never got to it: no answer says nothing of Postgres)."""

    outcome: Literal["ok", "timeout", "failed", "skipped", "loop_blocked"]
    error: str | None = None


def needs_ping(snapshot: WorkerSnapshot) -> bool:
    """Whether the ping is worth a round trip: not while the worker is leaving."""
    return not snapshot.shutting_down


def judge_readiness(
    snapshot: WorkerSnapshot, ping: PingResult, *, loop_responsive: bool = True
) -> tuple[int, dict[str, object]]:
    """``(status, body)`` of ``/ready`` for ``snapshot``, the ping's result and whether
    the worker's loop ran ``/live``'s callback in time."""
    reasons: list[str] = []
    if not snapshot.started:
        reasons.append(STARTING)
    if not loop_responsive:
        reasons.append(UNRESPONSIVE)
    if snapshot.shutting_down or snapshot.shutdown_phase != 0:
        reasons.append(SHUTTING_DOWN)
    if snapshot.stale_loops:
        reasons.append(STALE_LOOPS)
    if ping.outcome == "timeout":
        reasons.append(PG_PING_TIMEOUT)
    elif ping.outcome == "failed":
        reasons.append(PG_PING_FAILED)
    elapsed = snapshot.shutdown_elapsed_seconds
    body: dict[str, object] = {
        "ready": not reasons,
        "redis_configured": snapshot.redis_configured,
        "active_jobs": snapshot.active_jobs,
        "is_leader": snapshot.is_leader,
        "shutdown_phase": snapshot.shutdown_phase_name,
        "shutdown_elapsed_seconds": None if elapsed is None else round(elapsed, 3),
        "loop_tick_ages": {name: round(age, 3) for name, age in snapshot.loop_tick_ages.items()},
        "stale_loops": list(snapshot.stale_loops),
        "pg_ping": ping.outcome,
        "reasons": reasons,
    }
    if ping.error is not None:
        body["pg_ping_error"] = ping.error
    return (200 if not reasons else 503), body
