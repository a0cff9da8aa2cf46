"""How far ahead the producer claims: the jobs its consumers will finish meanwhile.

A claim carries the finished jobs' writes and brings the next jobs in one
round trip, and while it is under way the consumers keep running what they
hold. When jobs take less time than that round trip, every job in hand is
done before the claim returns, so a claim of only the local queue's free
slots leaves the consumers idle until the next one: the round trip, not the
jobs, sets the pace. So the producer also asks for the jobs its consumers are
expected to finish while the claim is in flight, ``max_concurrency`` times
(claim time / job time), at most ``max_concurrency`` more. What does not fit
the queue when the claim returns waits in it past its size, as the worker
guide's producer holds a batch while its ``put`` waits for room, and the
producer claims nothing more until the queue is back within its size. So a
worker holds at most ``max_concurrency`` running jobs plus twice that many
claimed, and that only while its jobs are shorter than a claim. The same
estimate lets the next claim go out while the last batch still fills the
queue: its slots free up before that claim returns.

Both times are moving averages of the recent ones on the worker's clock. Until
both have been seen (and whenever a claim took no time, as on a fake clock)
nothing extra is asked for.
"""

from __future__ import annotations

from typing import Final

#: Weight of the newest sample in each moving average.
WEIGHT: Final = 0.2


class ClaimPace:
    """Recent claim and job durations, and the extra jobs a claim should ask for."""

    def __init__(self, concurrency: int) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self.concurrency = concurrency
        #: Moving averages in seconds; None until the first sample.
        self.claim_seconds: float | None = None
        self.job_seconds: float | None = None

    def __repr__(self) -> str:
        return f"<ClaimPace claim={self.claim_seconds} job={self.job_seconds} ahead={self.ahead()}>"

    def claim_took(self, seconds: float) -> None:
        self.claim_seconds = _averaged(self.claim_seconds, seconds)

    def job_ran(self, seconds: float) -> None:
        self.job_seconds = _averaged(self.job_seconds, seconds)

    def ahead(self) -> int:
        """How many jobs beyond the free slots the next claim asks for (0..concurrency)."""
        claim, job = self.claim_seconds, self.job_seconds
        if claim is None or job is None or claim <= 0:
            return 0
        if job <= 0:
            return self.concurrency
        return min(self.concurrency, int(self.concurrency * claim / job))


def _averaged(average: float | None, sample: float) -> float:
    sample = max(sample, 0.0)
    return sample if average is None else average + WEIGHT * (sample - average)


__all__ = ["ClaimPace"]
