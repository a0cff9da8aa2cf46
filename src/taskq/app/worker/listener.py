"""The NOTIFY listener: wake-ups for this worker's queues wake the producer.

It starts the notifier, subscribes, and every ``notify_health_check_interval``
runs ``notifier.health_check()`` (the notifier reconnects with bounded
backoff and re-subscribes). A notifier that cannot start is retried at the
same cadence; the producer's slow poll covers the gap either way. With
``TASKQ_NOTIFY_ENABLED=false`` (or no notifier) it only waits for shutdown.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable

from taskq.app.worker import events
from taskq.app.worker.task_views import ListenerView
from taskq.app.worker.waiting import until_stopped, wait_event
from taskq.domain.errors import TaskQError
from taskq.ports.notifier import Notifier


async def run_listener(state: ListenerView) -> None:
    """Keep the subscription healthy until the shutdown event."""
    notifier = state.notifier
    if notifier is None or not state.settings.notify_enabled:
        await state.shutdown_event.wait()
        return
    queues = set(state.queues)

    def on_wake(queue: str) -> None:
        # "" means any queue (e.g. a bulk enqueue across queues, or pg_notify by hand).
        if not queue or queue in queues:
            state.wake.set()

    unsubscribe = notifier.subscribe(on_wake)
    interval = state.settings.notify_health_check_interval
    started = False
    healthy = True
    try:
        while True:
            if not started:
                started = await _until_shutdown(state, _start(notifier))
                if started:
                    state.wake.set()  # anything enqueued before we listened
            else:
                was_connected = notifier.connected
                ok = await _until_shutdown(state, _healthy(notifier))
                if state.shutdown_event.is_set():
                    return
                if ok and (not healthy or not was_connected):
                    # Reconnected: wake-ups published meanwhile were lost, so claim now.
                    events.emit(events.NOTIFY_RECOVERED)
                    state.wake.set()
                elif not ok and healthy:
                    events.emit(events.NOTIFY_UNHEALTHY, logging.WARNING)
                healthy = ok
            if await wait_event(state.clock, interval, state.shutdown_event):
                return
    finally:
        unsubscribe()


async def _start(notifier: Notifier) -> bool:
    try:
        await notifier.start()
    except TaskQError as exc:
        events.emit(events.NOTIFY_START_FAILED, logging.WARNING, error=str(exc))
        return False
    return True


async def _healthy(notifier: Notifier) -> bool:
    try:
        return await notifier.health_check()
    except TaskQError as exc:
        events.emit(events.NOTIFY_UNHEALTHY, logging.DEBUG, error=str(exc))
        return False


async def _until_shutdown(state: ListenerView, work: Awaitable[bool]) -> bool:
    """``work``, given up (False) when the shutdown event is set: during an outage a
    health check's reconnect backoff runs for minutes and must not hold the exit."""
    try:
        return await until_stopped(state.clock, work, state.shutdown_event, 0.0)
    except TimeoutError:
        return False
