"""The demo's sample actors: ordinary TaskQ actors, written as an application would.

- ``make_thumbnail`` — a plain ``def`` (runs in a worker thread), always succeeds;
- ``send_email`` — async; a payload may ask it to fail its first attempts
  (a busy mail server), so it is retried with backoff and then succeeds;
- ``charge_card`` — async; the test card ``DECLINED_CARD`` fails every
  attempt, so those jobs run out of retries and end ``failed``;
- ``send_reminder`` — async, always succeeds; the demo enqueues these a few
  seconds in the future.

Each attempt is also recorded on a :class:`DemoLedger`, a PROCESS-scope
dependency, which is how the live display counts outcomes as they happen.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any, Final

from pydantic import BaseModel, Field

from taskq.app.actors.decorator import actor
from taskq.app.actors.ref import ActorRef
from taskq.app.context import JobContext
from taskq.app.di import Dependencies, Scope
from taskq.domain.retry import RetryPolicy

DEMO_QUEUE: Final = "demo"
#: Charges on this card fail on every attempt (like a payment provider's test card).
DECLINED_CARD: Final = "4000-0000-0000-0002"

# Short backoff so retries happen while you watch: about 0.5 s, then 1 s.
_QUICK_RETRY: Final = timedelta(milliseconds=500)
EMAIL_RETRY: Final = RetryPolicy(max_attempts=4, base=_QUICK_RETRY, cap=timedelta(seconds=5))
CHARGE_RETRY: Final = RetryPolicy(max_attempts=3, base=_QUICK_RETRY, cap=timedelta(seconds=5))
_METADATA: Final = {"demo": True}


@dataclass(frozen=True, slots=True)
class LedgerCounts:
    """What the actors have reported so far."""

    attempts: int = 0
    succeeded: int = 0
    failed: int = 0  # final failures: no attempt left
    retried: int = 0  # failed attempts that will be retried


class DemoLedger:
    """Thread-safe outcome counters (sync actors report from worker threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = LedgerCounts()

    def __repr__(self) -> str:
        return f"DemoLedger({self.counts()})"

    def counts(self) -> LedgerCounts:
        with self._lock:
            return self._counts

    def succeeded(self) -> None:
        with self._lock:
            c = self._counts
            self._counts = LedgerCounts(c.attempts + 1, c.succeeded + 1, c.failed, c.retried)

    def failed_attempt(self, ctx: JobContext[Any]) -> None:
        """Record a failing attempt; final when it was the job's last one."""
        final = ctx.max_attempts is not None and ctx.attempt >= ctx.max_attempts
        with self._lock:
            c = self._counts
            self._counts = LedgerCounts(
                c.attempts + 1,
                c.succeeded,
                c.failed + (1 if final else 0),
                c.retried + (0 if final else 1),
            )


Ledger = Annotated[DemoLedger, Scope.PROCESS]


def _work_seconds(seed: int, low_ms: int, high_ms: int) -> float:
    """A duration that varies per job but is the same on every run."""
    return (low_ms + (seed * 7919) % (high_ms - low_ms)) / 1000


# -- payloads and results ---------------------------------------------------------------


class Thumbnail(BaseModel):
    image_id: int
    width: int = Field(default=256, gt=0)


class ThumbnailResult(BaseModel):
    url: str


class Email(BaseModel):
    to: str
    subject: str
    fail_first: int = Field(default=0, ge=0, description="attempts that fail before success")


class Charge(BaseModel):
    order_id: int
    amount_cents: int = Field(gt=0)
    card: str


class Receipt(BaseModel):
    order_id: int
    charged_cents: int


class Reminder(BaseModel):
    user_id: int
    text: str


class MailServerBusy(Exception):
    """A transient error: the next attempt may work."""


class CardDeclined(Exception):
    """The card is declined on every attempt."""


# -- actors -----------------------------------------------------------------------------


@actor(queue=DEMO_QUEUE, metadata=_METADATA)
def make_thumbnail(payload: Thumbnail, ledger: Ledger) -> ThumbnailResult:
    time.sleep(_work_seconds(payload.image_id, 30, 150))  # blocking is fine in a thread
    ledger.succeeded()
    return ThumbnailResult(url=f"https://cdn.example/{payload.image_id}-{payload.width}.png")


@actor(queue=DEMO_QUEUE, retry=EMAIL_RETRY, metadata=_METADATA)
async def send_email(payload: Email, ctx: JobContext[Email], ledger: Ledger) -> None:
    await asyncio.sleep(_work_seconds(ctx.job_id, 20, 120))
    if ctx.attempt <= payload.fail_first:
        ledger.failed_attempt(ctx)
        raise MailServerBusy(f"421 {payload.to}: mail server busy (attempt {ctx.attempt})")
    ledger.succeeded()


@actor(queue=DEMO_QUEUE, retry=CHARGE_RETRY, metadata=_METADATA)
async def charge_card(payload: Charge, ctx: JobContext[Charge], ledger: Ledger) -> Receipt:
    await asyncio.sleep(_work_seconds(payload.order_id, 40, 160))
    if payload.card == DECLINED_CARD:
        ledger.failed_attempt(ctx)
        raise CardDeclined(f"order {payload.order_id}: card {payload.card} declined")
    ledger.succeeded()
    return Receipt(order_id=payload.order_id, charged_cents=payload.amount_cents)


@actor(queue=DEMO_QUEUE, metadata=_METADATA)
async def send_reminder(payload: Reminder, ledger: Ledger) -> None:
    await asyncio.sleep(_work_seconds(payload.user_id, 10, 60))
    ledger.succeeded()


REGISTRY: Final[tuple[ActorRef[Any, Any], ...]] = (
    make_thumbnail,
    send_email,
    charge_card,
    send_reminder,
)


def demo_dependencies(ledger: DemoLedger) -> Dependencies:
    """The providers the demo actors need: this process's ``ledger``."""
    deps = Dependencies()
    deps.register(DemoLedger, lambda: ledger, scope=Scope.PROCESS)
    return deps


__all__ = [
    "DECLINED_CARD",
    "DEMO_QUEUE",
    "REGISTRY",
    "Charge",
    "DemoLedger",
    "Email",
    "LedgerCounts",
    "Reminder",
    "Thumbnail",
    "charge_card",
    "demo_dependencies",
    "make_thumbnail",
    "send_email",
    "send_reminder",
]
