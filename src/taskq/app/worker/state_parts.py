"""The parts of a worker's state, each owned by the task that changes it.

Each part is a small object its owner holds as is; every other task sees it
through the read-only protocol beside it (``task_views`` says who sees what),
and changes it only through the owner's methods named there:

- ``Stopping``, the shutdown's (and the runtime's): when the shutdown began, how
  it cancels jobs, the exit code and the problem; anyone may ask to stop;
- ``Leadership``, the leader's: whether this worker leads; the shutdown asks it
  to let go;
- ``OutcomeLedger``, the consumers' write pipeline's: writes under way and the
  outcomes that did not land; the heartbeat lets go of those whose lease is gone;
- ``LeaseWatch``, the heartbeat's: whether the store looks down, orphan
  suspects, leases given back, cancel phases; the producer may say a claim failed
  and takes back a late claim's given-back lease.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol

from taskq.app.worker.exit_codes import ExitCode
from taskq.app.worker.waiting import LatchEvent
from taskq.domain.cancel import CancelController, GracePeriods
from taskq.domain.job import Lease

#: How many given-back orphan leases the worker remembers (a claim answered that late is rare).
GIVEN_BACK_KEPT: Final = 4096

ShutdownCancel = Literal[None, "cooperative", "forced"]


# -- the shutdown's ------------------------------------------------------------------------


class StoppingView(Protocol):
    """What other tasks read of the shutdown, and how they ask for one."""

    @property
    def started_at(self) -> float | None: ...

    @property
    def cancel(self) -> ShutdownCancel: ...

    @property
    def in_progress(self) -> bool: ...

    @property
    def exit_code(self) -> int | None: ...

    @property
    def problem(self) -> str | None: ...

    def begin(self, now: float) -> None: ...

    def set_exit_code(self, code: int) -> None: ...

    def note_problem(self, problem: str) -> None: ...

    def stop_for(self, problem: str) -> None: ...


@dataclass(eq=False, kw_only=True)
class Stopping:
    """How the worker stops (see ``StoppingView`` for what others may do)."""

    shutdown_event: LatchEvent
    producer_stop: LatchEvent
    #: First shutdown signal on the monotonic clock (the watchdog's anchor).
    started_at: float | None = None
    #: Set by the shutdown's CANCELLING / FORCING for jobs that start afterwards too.
    cancel: ShutdownCancel = None
    #: The exit code a task decided (until-idle 0/3/4/5, isolate-self 1).
    exit_code: int | None = None
    #: Why a task stopped the worker (printed as ``taskq: <problem>``), else None.
    problem: str | None = None
    #: Starts the graceful shutdown, as SIGTERM does (set by the runtime).
    request_shutdown: Callable[[str], None] | None = None

    @property
    def in_progress(self) -> bool:
        """True from the first shutdown signal (or any direct shutdown) on."""
        return self.started_at is not None or self.shutdown_event.is_set()

    def begin(self, now: float) -> None:
        """The shutdown began at ``now`` (monotonic), unless it began before."""
        if self.started_at is None:
            self.started_at = now

    def set_exit_code(self, code: int) -> None:
        """Record why the worker is stopping; the first reason wins."""
        if self.exit_code is None:
            self.exit_code = code

    def note_problem(self, problem: str) -> None:
        """Say why the worker stops (printed as ``taskq: <problem>``); the first wins."""
        if self.problem is None:
            self.problem = problem

    def stop_for(self, problem: str) -> None:
        """Stop the worker gracefully with exit 1 and ``problem`` as its one-line reason."""
        self.note_problem(problem)
        self.set_exit_code(ExitCode.ERROR)
        self.producer_stop.set()
        if self.request_shutdown is not None:
            self.request_shutdown(problem)
        else:
            self.shutdown_event.set()


# -- the leader's --------------------------------------------------------------------------


class LeadershipView(Protocol):
    @property
    def is_leader(self) -> bool: ...

    def let_go(self) -> None: ...


@dataclass(eq=False)
class Leadership:
    is_leader: bool = False
    #: Set by the shutdown (``let_go``): stop leading and do not run again.
    released: asyncio.Event = field(default_factory=asyncio.Event)

    def let_go(self) -> None:
        self.released.set()


# -- the consumers' write pipeline's -------------------------------------------------------


class OutcomeLedgerView(Protocol):
    @property
    def writing(self) -> Set[int]: ...

    @property
    def unwritten(self) -> Set[Lease]: ...

    @property
    def writes_in_flight(self) -> int: ...

    @property
    def drain_failures(self) -> int: ...

    def keep_unwritten(self, leases: Iterable[Lease]) -> None: ...


@dataclass(eq=False)
class OutcomeLedger:
    #: Terminal writes submitted and not yet answered (consumers do not wait for them).
    writes_in_flight: int = 0
    #: Jobs this worker's consumers wrote ``failed`` (until-idle exit code 3).
    drain_failures: int = 0
    #: Jobs whose outcome write (terminal, reschedule, release) is under way or retried.
    writing: set[int] = field(default_factory=set)
    #: Leases of jobs that ran but whose outcome write gave up: the heartbeat lets them
    #: lapse, so the leader's sweep reclaims the jobs.
    unwritten: set[Lease] = field(default_factory=set)

    def keep_unwritten(self, leases: Iterable[Lease]) -> None:
        """Forget the unwritten leases not among ``leases`` (they are gone anyway)."""
        self.unwritten.intersection_update(leases)


# -- the heartbeat's -----------------------------------------------------------------------


class LeaseWatchView(Protocol):
    @property
    def store_suspect(self) -> bool: ...

    @property
    def given_back(self) -> Mapping[Lease, None]: ...

    @property
    def cancel_controller(self) -> CancelController: ...

    def suspect_store(self) -> None: ...

    def take_given_back(self, lease: Lease) -> None: ...


@dataclass(eq=False)
class LeaseWatch:
    cancel_controller: CancelController
    #: A claim or a heartbeat failed since the last heartbeat that worked: the network
    #: may be dead, so claims run where a stop can abandon them (producer._bounded),
    #: and the watchdog judges only the heartbeat loop stale (the isolation is in charge).
    store_suspect: bool = False
    #: Owned running jobs the last heartbeat found that this worker does not hold.
    orphan_suspects: set[Lease] = field(default_factory=set)
    #: Leases the heartbeat gave back as orphans (oldest first, bounded): should the
    #: claim's answer arrive after all, the producer drops those jobs unrun.
    given_back: dict[Lease, None] = field(default_factory=dict)
    #: The heartbeat's extension of this worker's reservation leases under way, if any
    #: (it runs beside the beats, never holding one up: see ``heartbeat``).
    reservations_extension: asyncio.Future[None] | None = None

    @classmethod
    def new(cls, graces: GracePeriods) -> LeaseWatch:
        return cls(CancelController(graces))

    def suspect_store(self) -> None:
        """A store call failed (a claim): the network may be dead."""
        self.store_suspect = True

    def remember_given_back(self, lease: Lease) -> None:
        """Remember a lease given back, so its claim's late answer is not run (bounded)."""
        given_back = self.given_back
        given_back[lease] = None
        while len(given_back) > GIVEN_BACK_KEPT:
            del given_back[next(iter(given_back))]

    def take_given_back(self, lease: Lease) -> None:
        """A late claim's answer brought ``lease`` back: it was dropped, forget it."""
        self.given_back.pop(lease, None)


__all__ = [
    "GIVEN_BACK_KEPT",
    "Leadership",
    "LeadershipView",
    "LeaseWatch",
    "LeaseWatchView",
    "OutcomeLedger",
    "OutcomeLedgerView",
    "ShutdownCancel",
    "Stopping",
    "StoppingView",
]
