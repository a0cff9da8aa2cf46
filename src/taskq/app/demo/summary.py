"""The demo's final tally, read back from the database, and how it is printed."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from rich import box
from rich.console import Console
from rich.table import Table

from taskq.app.client import JobsClient
from taskq.app.demo.plan import Expected
from taskq.domain.job import Job
from taskq.domain.status import JobStatus

#: Reads in flight while tallying (well under the client pool's size).
_READ_CONCURRENCY: Final = 4


@dataclass(slots=True)
class ActorTally:
    """One actor's jobs by final status, and how many attempts they took."""

    jobs: int = 0
    succeeded: int = 0
    failed: int = 0
    unfinished: int = 0  # still pending, scheduled or running
    other: int = 0  # cancelled, abandoned or crashed
    retried: int = 0
    attempts: int = 0

    def add(self, job: Job) -> None:
        self.jobs += 1
        self.attempts += job.attempt
        self.retried += 1 if job.attempt > 1 else 0
        if job.status is JobStatus.SUCCEEDED:
            self.succeeded += 1
        elif job.status is JobStatus.FAILED:
            self.failed += 1
        elif job.status in (JobStatus.PENDING, JobStatus.SCHEDULED, JobStatus.RUNNING):
            self.unfinished += 1
        else:
            self.other += 1


@dataclass(slots=True)
class Tally:
    """Every demo job's final state, per actor and in total."""

    by_actor: dict[str, ActorTally] = field(default_factory=dict)
    missing: int = 0  # enqueued, yet not found when read back

    @classmethod
    def of(cls, jobs: Iterable[Job | None], actors: Sequence[str]) -> Tally:
        tally = cls({name: ActorTally() for name in actors})
        for job in jobs:
            if job is None:
                tally.missing += 1
            else:
                tally.by_actor.setdefault(job.actor, ActorTally()).add(job)
        return tally

    @property
    def total(self) -> ActorTally:
        out = ActorTally()
        for t in self.by_actor.values():
            out.jobs += t.jobs
            out.succeeded += t.succeeded
            out.failed += t.failed
            out.unfinished += t.unfinished
            out.other += t.other
            out.retried += t.retried
            out.attempts += t.attempts
        return out

    def matches(self, expected: Expected) -> bool:
        """Whether every job ended as the plan says (attempt counts are not compared)."""
        t = self.total
        return (
            self.missing == 0
            and t.unfinished == 0
            and t.other == 0
            and (t.succeeded, t.failed) == (expected.succeeded, expected.failed)
        )


async def read_tally(client: JobsClient, job_ids: Sequence[int], actors: Sequence[str]) -> Tally:
    """Read every job back through the client (a few reads at a time)."""
    gate = asyncio.Semaphore(_READ_CONCURRENCY)

    async def one(job_id: int) -> Job | None:
        async with gate:
            return await client.get(job_id)

    jobs = await asyncio.gather(*(one(job_id) for job_id in job_ids))
    return Tally.of(jobs, actors)


def actor_table(tally: Tally) -> Table:
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 2), show_edge=False, header_style="bold")
    table.add_column("actor")
    for column in ("jobs", "succeeded", "failed", "retried", "attempts"):
        table.add_column(column, justify="right")
    rows = [*tally.by_actor.items(), ("total", tally.total)]
    for index, (name, t) in enumerate(rows):
        table.add_row(
            name,
            str(t.jobs),
            str(t.succeeded),
            str(t.failed),
            str(t.retried),
            str(t.attempts),
            end_section=index == len(rows) - 2,
        )
    return table


@dataclass(frozen=True, slots=True)
class RunFacts:
    """What the summary says besides the tally."""

    elapsed: float  # seconds from worker start to idle
    peak_rate: float
    worker_exit_code: int
    declined_card: str
    log_path: str


def print_summary(console: Console, tally: Tally, expected: Expected, facts: RunFacts) -> None:
    """The tally table, the headline numbers, and what the exit code means."""
    t = tally.total
    finished = t.succeeded + t.failed
    rate = finished / facts.elapsed if facts.elapsed > 0 else 0.0
    attempt_rate = t.attempts / facts.elapsed if facts.elapsed > 0 else 0.0
    console.print()
    console.print("[bold]Summary[/bold] (read back from the database)")
    console.print(actor_table(tally))
    console.print()
    rows = [
        ("succeeded", f"{t.succeeded}", ""),
        (
            "failed after retries",
            f"{t.failed}",
            f"charge_card with test card {facts.declined_card}: declined on every attempt",
        ),
        ("retried", f"{t.retried}", "jobs that needed more than one attempt"),
        ("total attempts", f"{t.attempts}", ""),
        (
            "elapsed",
            f"{facts.elapsed:.1f} s",
            "the worker's run, incl. waiting for the scheduled jobs",
        ),
        (
            "throughput",
            f"{rate:.1f} jobs/s",
            f"{attempt_rate:.1f} attempts/s, peak {facts.peak_rate:.0f} jobs/s",
        ),
    ]
    width = max(len(label) for label, _, _ in rows)
    for label, value, note in rows:
        suffix = f"  [dim]{note}[/dim]" if note else ""
        console.print(f"  {label:<{width}}  {value:>12}{suffix}")
    if t.unfinished:
        console.print(f"  [yellow]{t.unfinished} jobs were still waiting or running[/yellow]")
    if t.other:
        console.print(f"  [yellow]{t.other} jobs ended cancelled, abandoned or crashed[/yellow]")
    console.print()
    if tally.matches(expected):
        console.print("[green]exit code 0[/green]: the demo ran as designed.")
        if t.failed:
            worker_said = (
                f" The worker itself returned {facts.worker_exit_code} (drained, with failures),"
                " which is what `taskq worker --until-idle` exits with for such a run."
                if facts.worker_exit_code == 3
                else ""
            )
            console.print(
                f"The failures ({t.failed}) are planned: they show retries running out on a "
                f"declined card, so they do not make the demo fail.{worker_said}"
            )
    console.print(f"[dim]worker log: {facts.log_path}[/dim]")
    console.print(
        "Next: docs/quickstart.md shows how to write an actor, enqueue it and run `taskq worker`."
    )


__all__ = ["ActorTally", "RunFacts", "Tally", "actor_table", "print_summary", "read_tally"]
