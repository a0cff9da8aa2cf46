"""The producer: claims due jobs in batches and feeds the local queue.

Each round claims as many jobs as the local queue has free slots (its size
is ``max_concurrency``), plus the jobs its consumers are expected to finish
while the claim is in flight (``state.claim_pace``: only when jobs are
shorter than a claim, at most ``max_concurrency`` more), only on this
worker's queues and only for actors it has registered. What does not fit the
queue when a claim returns waits in it past its size, and no claim goes out
while it does: a worker holds at most ``max_concurrency`` running jobs and
twice that many claimed.

A full batch means more work is probably waiting, so it claims again as soon
as ``state.claim_threshold`` slots are free (half the queue: the consumers
still have work meanwhile, and fewer, larger claims cost the database less),
counting the slots the consumers will free during the claim: with jobs
shorter than a claim, the next one goes out as soon as the last returns, and
its round trip overlaps the consumers' work on that batch. Until then it
waits for consumers to take jobs. Otherwise it sleeps until a wake-up
(NOTIFY via the listener, or the leader's promotion of scheduled jobs) or the
poll interval (``notify_poll_interval`` with NOTIFY on, else ``poll_interval``).

A claim that fails (the store is unreachable, or handed out a connection the
server had just closed) is retried soon: after ``CLAIM_RETRY_INITIAL``, the
wait doubling with each failure in a row up to the poll interval, so a lost
connection costs a job a fraction of a second while a long outage is tried
at the poll's cadence.

While claiming it holds ``state.claim_lock``, so the shutdown's drain never
runs between a claim and the queueing of what it returned.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from datetime import timedelta
from typing import Final, TypeVar

from taskq.app.worker import events
from taskq.app.worker.batching import GroupCommit
from taskq.app.worker.refused_writes import UNSTORABLE, write_one_by_one
from taskq.app.worker.task_views import ProducerView
from taskq.app.worker.waiting import until_stopped, wait_event
from taskq.domain.errors import SchemaNotMigrated, StoreUnavailable, TaskQError
from taskq.domain.job import ClaimedJob
from taskq.ports.store_params import ClaimRequest

T = TypeVar("T")

#: Wait before retrying a failed claim; doubled per failure in a row, up to the poll.
CLAIM_RETRY_INITIAL: Final = 0.1


def claim_retry_delay(failures: int, poll: float) -> float:
    """Seconds before the next claim after ``failures`` (>= 1) failed claims in a row."""
    return min(poll, CLAIM_RETRY_INITIAL * 2.0 ** min(failures - 1, 32))


async def run_producer(state: ProducerView) -> None:
    """Claim until the producer is stopped, then wait for the shutdown event."""
    settings = state.settings
    poll = settings.effective_poll_interval
    actors = sorted(state.registry)
    threshold = state.claim_threshold
    stops = (state.producer_stop, state.shutdown_event)
    failures = 0
    while not (state.producer_stop.is_set() or state.shutdown_event.is_set()):
        state.liveness.tick("producer", poll)
        room = state.claim_room()
        if room < threshold:
            # Too few slots free at this instant, so an earlier slot_freed is stale.
            state.slot_freed.clear()
            full = True
        else:
            # Cleared before the claim: a wake-up arriving during it runs another round.
            state.wake.clear()
            state.slot_freed.clear()
            claimed = await _claim(state, actors, room)
            if claimed is None:
                failures += 1
                await wait_event(state.clock, claim_retry_delay(failures, poll), *stops)
                continue
            failures = 0
            full = claimed == room
            if full and state.claim_room() >= threshold:
                continue  # a full batch, and consumers made (or took) room: claim again
        if full:
            # More work is probably waiting: claim once consumers free enough slots.
            await wait_event(state.clock, poll, *stops, state.slot_freed)
        else:
            await wait_event(state.clock, poll, *stops, state.wake)
    state.liveness.forget("producer")
    await state.shutdown_event.wait()


async def _claim(state: ProducerView, actors: list[str], limit: int) -> int | None:
    """One claim into the local queue; the number claimed, None when the store failed.

    The terminal writes consumers queued since the last round travel with it
    (``finish_and_claim``): one round trip, one commit, for both.
    """
    if not state.queues or not actors:
        return 0
    async with state.claim_lock:
        if state.producer_stop.is_set():
            return 0
        request = ClaimRequest(
            worker_id=state.worker_id,
            queues=state.queues,
            actors=actors,
            limit=limit,
            lease=state.lease,
            # The consumers waiting now take the first jobs at once: the claim marks those
            # started itself; the rest get their mark when a consumer takes them.
            start_now=state.local_queue.idle(),
        )
        writes = state.completer
        carried = writes.take() if writes is not None else []
        if writes is not None:
            writes.hold()  # what is finished meanwhile waits for the next round
        started = state.clock.monotonic()
        try:
            if carried:
                try:
                    lost, jobs = await _bounded(
                        state,
                        state.store.finish_and_claim([finish for finish, _ in carried], request),
                    )
                except UNSTORABLE:
                    # A write the store cannot keep refused the round trip (nothing written,
                    # nothing claimed): the writes go one by one, the claim alone.
                    assert writes is not None
                    # Each bounded by the lease, as the completer's own writes are.
                    one_by_one = write_one_by_one(
                        state.store,
                        [finish for finish, _ in carried],
                        bound=state.write_bounds.job,
                    )
                    writes.settle(carried, await one_by_one)
                    carried = []
                    jobs = await _bounded(state, state.store.claim(request))
            else:
                jobs = await _bounded(state, state.store.claim(request))
        except TaskQError as exc:
            GroupCommit.fail(carried, exc)
            if isinstance(exc, SchemaNotMigrated):
                # Retrying cannot help (someone migrated the schema down): stop, exit 1.
                events.emit(events.WORKER_CONFIG_ERROR, logging.ERROR, error=str(exc))
                state.stopping.stop_for(str(exc))
                return 0
            events.emit(events.PRODUCER_CLAIM_FAILED, logging.WARNING, error=str(exc))
            state.watch.suspect_store()
            return None
        except Exception as exc:
            GroupCommit.fail(carried, exc)
            raise
        except BaseException:
            GroupCommit.fail(carried, None)
            raise
        finally:
            if writes is not None:
                writes.release()
        took = state.clock.monotonic() - started
        state.claim_pace.claim_took(took)
        state.metrics.claimed(took, len(jobs))
        if carried and writes is not None:
            not_held = set(lost)
            writes.settle(carried, [finish.lease in not_held for finish, _ in carried])
        given_back = state.watch.given_back
        for job in jobs:
            if job.id in state.active:
                # An earlier attempt of it still runs here: its lease was taken back (the
                # process paused past it) and it is being asked to stop. Running both in
                # one worker would mix up their bookkeeping: give this claim back for the
                # cancellation grace, by which the old attempt should have stopped.
                await _give_back_for_now(state, job)
                continue
            if given_back and job.lease in given_back:
                state.watch.take_given_back(job.lease)
                # Its answer came after the heartbeat gave it back: someone else may run it now.
                events.emit(
                    events.JOB_ORPHAN_DROPPED,
                    logging.WARNING,
                    job_id=job.id,
                    fencing_token=job.fencing_token,
                )
                continue
            # Never blocks: only the producer puts. Jobs claimed for slots the consumers were
            # expected to free (claim_pace) wait past the queue's size if those are not free.
            state.local_queue.put_nowait(job, overfill=True)
    return len(jobs)


async def _give_back_for_now(state: ProducerView, job: ClaimedJob) -> None:
    delay = timedelta(seconds=max(state.settings.cancellation_grace_period, 1.0))
    events.emit(
        events.JOB_STILL_RUNNING_HERE,
        logging.WARNING,
        job_id=job.id,
        fencing_token=job.fencing_token,
        released_for_seconds=delay.total_seconds(),
        reason="claimed again while an earlier attempt of it, whose lease was lost, still "
        "runs in this worker",
    )
    try:
        await state.write_bounds.command(state.store.release(job.lease, delay=delay))
    except TaskQError as exc:  # LeaseLost too: its lease lapses, or someone else has it
        events.emit(
            events.JOB_WRITE_FAILED, logging.ERROR, job_id=job.id, write="release", error=str(exc)
        )


async def _bounded(state: ProducerView, work: Awaitable[T]) -> T:
    """A claim round trip, given up ``heartbeat_command_timeout`` after the producer is
    stopped: on a dead network it would hold the claim lock, and so the shutdown's
    drain, forever. Jobs it claimed anyway come back when their leases expire.

    While the store answers, the claim runs in the producer's own task (a task per
    claim costs the claim loop two event-loop turns: a fifth of the drain rate), and
    a stop cancels it after the grace. Once a claim or a heartbeat has failed (the
    network may be dead), claims run in a task the stop abandons without waiting.
    """
    grace = state.settings.heartbeat_command_timeout
    if state.watch.store_suspect:
        try:
            return await until_stopped(state.clock, work, state.producer_stop, grace)
        except TimeoutError as exc:
            raise StoreUnavailable(f"claim abandoned at shutdown: {exc}") from exc
    task = asyncio.current_task()
    assert task is not None
    cancels: list[int] = []
    timers: list[asyncio.Future[None]] = []

    async def cut_off() -> None:
        await state.clock.sleep(grace)
        cancels.append(1)
        task.cancel()
        # psycopg answers a cancel by asking the server to cancel too, for up to 5 s
        # (in vain on a dead network); a second cancel makes it close the connection.
        await asyncio.sleep(0)
        if not task.done():
            cancels.append(1)
            task.cancel()

    def on_stop(_: object) -> None:
        if not timers:
            timers.append(asyncio.ensure_future(cut_off()))

    stop = state.producer_stop.future()
    stop.add_done_callback(on_stop)
    try:
        return await work
    except asyncio.CancelledError:
        if cancels:
            left = task.cancelling()
            for _ in cancels:
                left = task.uncancel()
            if left == 0:
                raise StoreUnavailable(f"claim abandoned {grace:g}s after the stop") from None
        raise
    finally:
        stop.remove_done_callback(on_stop)
        for timer in timers:
            timer.cancel()
