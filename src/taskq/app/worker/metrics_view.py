"""The worker's state as the scrape-time gauges read it (``observability.readings.WorkerView``)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from taskq.app.worker.task_views import HealthView


class StateView:
    """Reads ``state`` when a scrape or an OTel collection asks; never on the job path."""

    __slots__ = ("_state",)

    def __init__(self, state: HealthView) -> None:
        self._state = state

    def __repr__(self) -> str:
        return f"<StateView {self._state.worker_id}>"

    def local_queue_jobs(self) -> int:
        return self._state.local_queue.qsize()

    def active_jobs(self) -> int:
        return self._state.active.busy

    def is_leader(self) -> bool:
        return self._state.leadership.is_leader

    def tick_ages(self) -> Mapping[str, float]:
        return self._state.liveness.tick_ages()

    def now(self) -> datetime:
        return self._state.clock.now()


__all__ = ["StateView"]
