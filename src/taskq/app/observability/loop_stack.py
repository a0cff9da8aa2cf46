"""Where a thread is now: its stack as code locations, for ``/tasks``.

A task dump shows where each task awaits; when the worker's loop is blocked,
the one task running shows its await site, not the sync call blocking the
thread. Read from another thread through ``sys._current_frames()`` (what
``faulthandler`` and the loop-lag watchdog rely on too), code locations only:
a frame's locals may hold payloads, so they are never read.
"""

from __future__ import annotations

import sys
import traceback
from typing import Final

#: The innermost frames kept: where it blocks is at the bottom, what called it above.
MAX_FRAMES: Final = 40


def thread_stack(thread_id: int | None) -> list[str] | None:
    """``file:line in function`` of each frame of thread ``thread_id``, outermost first;
    None when there is no such thread (it ended) or no id to look for."""
    if thread_id is None:
        return None
    frame = sys._current_frames().get(thread_id)
    if frame is None:
        return None
    summary = traceback.StackSummary.extract(
        traceback.walk_stack(frame), limit=MAX_FRAMES, lookup_lines=False, capture_locals=False
    )
    return [f"{entry.filename}:{entry.lineno} in {entry.name}" for entry in reversed(summary)]
