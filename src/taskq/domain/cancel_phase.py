"""The persisted cancel phase of a running job (``jobs.cancel_phase``)."""

from __future__ import annotations

from enum import IntEnum


class CancelPhase(IntEnum):
    NONE = 0  # running normally
    COOPERATIVE = 1  # cancel requested: the worker sets ctx.cancel_event
    FORCED = 2  # cancellation grace elapsed: the worker cancels the task
    ABANDON_PENDING = 3  # cleanup grace elapsed: the worker marks it abandoned
