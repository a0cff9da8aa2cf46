"""Bounded exponential backoff for re-subscribing a lost LISTEN session.

The first reconnect attempt after a loss is immediate: a session ended by the
server (``pg_terminate_backend``, a pooler or proxy restart) usually comes back
at once, and every wake-up published meanwhile is lost. The delay before
attempt ``n >= 1`` (0-based, counted from the loss) is
``min(initial * 2**(n - 1), maximum)``. The count survives across health
checks until a reconnect succeeds, so a long outage settles at ``maximum``
between attempts instead of hammering a server that is coming back up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

#: ``TASKQ_NOTIFY_RECONNECT_BACKOFF_INITIAL``'s default, in seconds (the wait before the
#: second attempt).
DEFAULT_INITIAL: Final = 1.0
#: The cap the worker guide names for the doubling, in seconds.
DEFAULT_MAXIMUM: Final = 30.0
# 2**64 times any positive initial is far past any sane cap; stops float overflow.
_MAX_EXPONENT: Final = 64


def reconnect_delay(attempt: int, *, initial: float, maximum: float) -> float:
    """Seconds to wait before reconnect attempt ``attempt`` (0 is the first: no wait)."""
    if attempt < 0:
        raise ValueError(f"attempt must be >= 0, got {attempt}")
    if attempt == 0:
        return 0.0
    return min(initial * 2.0 ** min(attempt - 1, _MAX_EXPONENT), maximum)


@dataclass(slots=True)
class ReconnectBackoff:
    """The delay schedule of one listener: ``next_delay()`` per attempt, ``reset()`` on success."""

    initial: float = DEFAULT_INITIAL
    maximum: float = DEFAULT_MAXIMUM
    attempts: int = 0

    def __post_init__(self) -> None:
        if not self.initial > 0:
            raise ValueError(f"reconnect backoff initial must be > 0, got {self.initial}")
        if not self.maximum >= self.initial:
            raise ValueError(
                f"reconnect backoff max ({self.maximum}) must be >= initial ({self.initial})"
            )

    def next_delay(self) -> float:
        """The wait before the next attempt; counts that attempt."""
        delay = reconnect_delay(self.attempts, initial=self.initial, maximum=self.maximum)
        self.attempts += 1
        return delay

    def reset(self) -> None:
        """The session is back: the next loss starts again at ``initial``."""
        self.attempts = 0


__all__ = ["DEFAULT_INITIAL", "DEFAULT_MAXIMUM", "ReconnectBackoff", "reconnect_delay"]
