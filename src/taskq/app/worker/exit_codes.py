"""The worker's process exit codes."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0  # clean shutdown (until-idle: every job this worker ran succeeded)
    ERROR = 1  # configuration error, refused start, or the worker could not keep running
    WATCHDOG = 2  # a watchdog detector tripped (the process was wedged)
    UNTIL_IDLE_FAILURES = 3  # until-idle drained, but this worker failed at least one job
    UNTIL_IDLE_MAX_RUNTIME = 4  # until-idle gave up after --idle-max-runtime
    UNTIL_IDLE_STRANDED = 5  # until-idle: the only jobs left are ones no live worker can run


__all__ = ["ExitCode"]
