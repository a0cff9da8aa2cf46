"""What the demo enqueues for ``--jobs N``, and the outcome that proves it ran as designed.

The mix is fixed fractions of N, so a run's result is predictable::

    charge_card    3 % (at least 1) with the declined test card: fail every attempt
                   7 %              with a good card: succeed
    send_email    15 %              fail their first 1 or 2 attempts, then succeed
                  10 %              succeed at once
    send_reminder 10 %              scheduled 3 s (half) or 6 s (the rest) ahead
    make_thumbnail the rest         succeed
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from pydantic import BaseModel

from taskq.app.actors.ref import ActorRef
from taskq.app.demo.actors import (
    CHARGE_RETRY,
    DECLINED_CARD,
    Charge,
    Email,
    Reminder,
    Thumbnail,
    charge_card,
    make_thumbnail,
    send_email,
    send_reminder,
)

GOOD_CARD: Final = "4242-4242-4242-4242"
REMINDER_DELAYS: Final = (timedelta(seconds=3), timedelta(seconds=6))


@dataclass(frozen=True, slots=True)
class Batch:
    """One ``enqueue_many`` call: one actor, its payloads, how far ahead they are scheduled."""

    ref: ActorRef[Any, Any]
    payloads: Sequence[BaseModel]
    delay: timedelta | None = None

    @property
    def label(self) -> str:
        return self.ref.name


@dataclass(frozen=True, slots=True)
class Expected:
    """The outcome of a run that went as designed."""

    succeeded: int
    failed: int
    retried: int  # jobs that needed more than one attempt
    attempts: int


def _agree(count: int, one: str, many: str) -> str:
    """The verb for ``count`` jobs: a small demo may have one flaky email, or one card."""
    return one if count == 1 else many


@dataclass(frozen=True, slots=True)
class DemoPlan:
    """The demo's jobs for ``total`` (see the module docstring for the mix)."""

    total: int
    declined: int
    charged: int
    flaky_emails: int
    emails: int
    reminders: int
    thumbnails: int

    @classmethod
    def for_jobs(cls, total: int) -> DemoPlan:
        if total < 1:
            raise ValueError(f"the demo needs at least one job, got {total}")
        declined = max(1, round(total * 0.03))
        charged = total * 7 // 100
        flaky = total * 15 // 100
        emails = total * 10 // 100
        reminders = total * 10 // 100
        thumbnails = max(0, total - declined - charged - flaky - emails - reminders)
        return cls(total, declined, charged, flaky, emails, reminders, thumbnails)

    def _flaky_failures(self, index: int) -> int:
        return 1 + index % 2  # alternately one and two failing attempts

    @property
    def expected(self) -> Expected:
        extra = sum(self._flaky_failures(i) for i in range(self.flaky_emails))
        extra += self.declined * (CHARGE_RETRY.max_attempts - 1)
        return Expected(
            succeeded=self.total - self.declined,
            failed=self.declined,
            retried=self.flaky_emails + (self.declined if CHARGE_RETRY.max_attempts > 1 else 0),
            attempts=self.total + extra,
        )

    def describe(self) -> list[str]:
        """One line per actor: how many jobs, and what they will do."""
        lines = [
            f"{self.flaky_emails + self.emails} send_email: {self.flaky_emails} "
            + _agree(self.flaky_emails, "fails its", "fail their")
            + " first 1-2 attempts (mail server busy), then "
            + _agree(self.flaky_emails, "succeeds", "succeed")
            + " on a retry",
            f"{self.declined + self.charged} charge_card: {self.declined} "
            f"{_agree(self.declined, 'uses', 'use')} a test card that is declined every time "
            f"({CHARGE_RETRY.max_attempts} attempts, then failed for good)",
            f"{self.thumbnails} make_thumbnail: a plain def, run in a worker thread",
            f"{self.reminders} send_reminder: scheduled "
            + " and ".join(f"{d.total_seconds():g} s" for d in REMINDER_DELAYS)
            + " ahead",
        ]
        return [line for line in lines if not line.startswith("0 ")]

    def batches(self) -> list[Batch]:
        """The ``enqueue_many`` calls, in the order the demo makes them."""
        emails = _interleave(
            [
                Email(
                    to=f"user{2 * k}@example.com",
                    subject="Welcome",
                    fail_first=self._flaky_failures(k),
                )
                for k in range(self.flaky_emails)
            ],
            [
                Email(to=f"user{2 * k + 1}@example.com", subject="Welcome")
                for k in range(self.emails)
            ],
        )
        charges = _interleave(
            [
                Charge(order_id=1000 + k, amount_cents=1999, card=DECLINED_CARD)
                for k in range(self.declined)
            ],
            [
                Charge(order_id=5000 + k, amount_cents=500 + 25 * k, card=GOOD_CARD)
                for k in range(self.charged)
            ],
        )
        thumbnails = [Thumbnail(image_id=k) for k in range(self.thumbnails)]
        reminders = [
            Reminder(user_id=k, text="Your trial ends soon") for k in range(self.reminders)
        ]
        first_wave = self.reminders // 2
        plan = [
            Batch(send_email, emails),
            Batch(charge_card, charges),
            Batch(make_thumbnail, thumbnails),
            Batch(send_reminder, reminders[:first_wave], REMINDER_DELAYS[0]),
            Batch(send_reminder, reminders[first_wave:], REMINDER_DELAYS[1]),
        ]
        return [batch for batch in plan if batch.payloads]


def _interleave(first: Sequence[BaseModel], second: Sequence[BaseModel]) -> list[BaseModel]:
    """``a0 b0 a1 b1 …`` then the longer list's rest, so both kinds run from the start."""
    mixed: list[BaseModel] = []
    for a, b in zip(first, second, strict=False):
        mixed += [a, b]
    shorter = min(len(first), len(second))
    return mixed + list(first[shorter:]) + list(second[shorter:])


__all__ = ["GOOD_CARD", "REMINDER_DELAYS", "Batch", "DemoPlan", "Expected"]
