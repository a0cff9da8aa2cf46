"""Notifier: fan-out of wake-ups, unsubscribe, reconnect after the session is killed."""

from __future__ import annotations

import pytest

from taskq.ports.notifier import Notifier
from taskq.ports.store_params import CAP_LISTEN_NOTIFY
from taskq.testing.harness import Harness

from .helpers import WAIT, Inbox, within

pytestmark = [pytest.mark.taskq_ports("notifier"), pytest.mark.taskq_requires(CAP_LISTEN_NOTIFY)]

#: Reconnecting may back off after a failed first attempt (1s, doubling); allow a few.
RECONNECT_WAIT = 4 * WAIT


async def _started(harness: Harness) -> Notifier:
    notifier = await harness.open_notifier()
    await notifier.start()
    assert notifier.connected is True
    return notifier


async def test_publish_reaches_subscribers_on_every_notifier(harness: Harness) -> None:
    """A publish on one notifier reaches the subscribers of two other notifiers of the schema."""
    sender, left, right = [await _started(harness) for _ in range(3)]
    inbox_left, inbox_right, inbox_left_2 = Inbox(), Inbox(), Inbox()
    left.subscribe(inbox_left)
    left.subscribe(inbox_left_2)
    right.subscribe(inbox_right)
    await sender.publish("emails")
    for inbox in (inbox_left, inbox_left_2, inbox_right):
        await inbox.wait_for("emails")


async def test_publisher_hears_its_own_wake_ups(harness: Harness) -> None:
    """Subscribers on the publishing notifier itself get its wake-ups too."""
    notifier = await _started(harness)
    inbox = Inbox()
    notifier.subscribe(inbox)
    await notifier.publish("q1")
    await inbox.wait_for("q1")


async def test_any_queue_wake_up_is_delivered_as_empty_string(harness: Harness) -> None:
    """publish() with no queue delivers the empty string, meaning any queue."""
    sender, listener = await _started(harness), await _started(harness)
    inbox = Inbox()
    listener.subscribe(inbox)
    await sender.publish()
    await inbox.wait_for("")


async def test_unsubscribe_stops_delivery(harness: Harness) -> None:
    """After its unsubscribe function is called, a callback gets no more wake-ups."""
    sender, listener = await _started(harness), await _started(harness)
    dropped, kept = Inbox(), Inbox()
    unsubscribe = listener.subscribe(dropped)
    listener.subscribe(kept)
    await sender.publish("before")
    await dropped.wait_for("before")
    await kept.wait_for("before")
    unsubscribe()
    await sender.publish("after")
    # Wake-ups are delivered in order: once "sentinel" is in, "after" would be too.
    await sender.publish("sentinel")
    await kept.wait_for("sentinel")
    assert "after" in kept.received
    assert dropped.received == ["before"]


async def test_subscription_survives_a_killed_session(harness: Harness) -> None:
    """After a severed session, health_check() reconnects and the old subscription works again."""
    sender, listener = await _started(harness), await _started(harness)
    inbox = Inbox()
    listener.subscribe(inbox)
    await harness.sever(listener)
    assert await within(listener.health_check(), "reconnect", RECONNECT_WAIT) is True
    assert listener.connected is True
    await sender.publish("after-reconnect")
    await inbox.wait_for("after-reconnect")


async def test_a_killed_session_comes_back_by_itself_and_wakes_every_subscriber(
    harness: Harness,
) -> None:
    """After its session is killed a notifier listens again without a health_check, and
    each subscriber gets one wake-up for any queue (""): wake-ups may have been lost."""
    sender, listener = await _started(harness), await _started(harness)
    first, second = Inbox(), Inbox()
    listener.subscribe(first)
    listener.subscribe(second)
    await harness.sever(listener)
    for inbox in (first, second):
        await inbox.wait_for("")
    assert listener.connected is True
    await sender.publish("after-reconnect")
    for inbox in (first, second):
        await inbox.wait_for("after-reconnect")
        assert inbox.received == ["", "after-reconnect"]


async def test_health_check_of_a_live_notifier_is_true(harness: Harness) -> None:
    """health_check() on a healthy notifier returns True and keeps it connected."""
    notifier = await _started(harness)
    assert await within(notifier.health_check(), "health check") is True
    assert notifier.connected is True


async def test_close_is_idempotent(harness: Harness) -> None:
    """close() stops listening and may be called twice."""
    notifier = await _started(harness)
    await notifier.close()
    await notifier.close()
    assert notifier.connected is False
