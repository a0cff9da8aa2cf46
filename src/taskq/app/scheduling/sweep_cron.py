"""The cron expression of the leader's prune and archive-expiry sweeps (their
``TASKQ_*_CRON_EXPR`` settings): 5 fields, in UTC, on the same library as ``@cron``."""

from __future__ import annotations

from taskq.app.scheduling.expression import CronExpression


def sweep_cron(expr: str) -> CronExpression:
    """A sweep's 5-field cron expression, in UTC; ``ValueError`` naming the problem.

    ``?`` in a day field means any (as in Quartz): the sweeps' settings have always
    taken it, and the cron library does not.
    """
    parts = expr.split()
    if len(parts) != 5:
        raise ValueError(f"cron {expr!r} is not a 5-field cron expression")
    for day_field in (2, 4):
        if parts[day_field] == "?":
            parts[day_field] = "*"
    return CronExpression(" ".join(parts), "UTC")


__all__ = ["sweep_cron"]
