"""Values Postgres cannot store are refused by every adapter, with ValueError.

Postgres ``text`` cannot hold NUL, ``jsonb`` refuses the ``\\u0000`` escape,
``integer`` columns are 32-bit and ``max_attempts`` is at least 1. The memory
adapter refuses the same values, so application tests fail where production
would. A refused enqueue (or batch) stores nothing; a refused result changes
nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from taskq.domain.actor_config import ActorConfig, QueueMode
from taskq.domain.job import JSON
from taskq.domain.status import JobStatus
from taskq.ports.store_params import Finish, WorkerInfo
from taskq.testing.harness import EPOCH, Harness

from .helpers import at, enqueue_and_claim, get, new_job

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
NUL = "\x00"
#: What a refusal names: the NUL (as a character or jsonb's \u0000 escape) or the integer field.
REFUSAL = r"(?i)\bNUL\b|\\u0000|unicode escape|priority|max_attempts"

#: Each text field of a new job, set to a value holding NUL.
NUL_TEXT_FIELDS: dict[str, dict[str, Any]] = {
    "queue": {"queue": f"q{NUL}"},
    "actor": {"actor": f"a{NUL}"},
    "identity_key": {"identity_key": f"k{NUL}"},
    "idempotency_key": {"idempotency_key": f"{NUL}idem"},
    "fairness_key": {"fairness_key": f"tenant{NUL}1"},
    "tags": {"tags": ("ok", f"t{NUL}")},
    "trace_id": {"trace_id": NUL},
    "span_id": {"span_id": f"s{NUL}"},
}

#: JSON documents (payload, metadata) holding NUL in a key or in a nested string.
NUL_DOCUMENTS: dict[str, dict[str, JSON]] = {
    "value": {"s": f"a{NUL}b"},
    "key": {f"k{NUL}": 1},
    "nested": {"items": [1, {"deep": ["x", NUL]}]},
}

#: Integer fields and values outside what their column holds.
BAD_INTEGERS: list[tuple[str, int]] = [
    ("priority", INT32_MAX + 1),
    ("priority", INT32_MIN - 1),
    ("priority", 2**63),
    ("max_attempts", INT32_MAX + 1),
    ("max_attempts", 0),
    ("max_attempts", -1),
]


async def _refused(harness: Harness, **fields: Any) -> None:
    """One enqueue with ``fields`` raises ValueError and stores nothing."""
    with pytest.raises(ValueError, match=REFUSAL):
        await harness.store.enqueue(new_job(**fields), now=EPOCH)
    assert await harness.store.count_active() == 0


@pytest.mark.parametrize("fields", NUL_TEXT_FIELDS.values(), ids=NUL_TEXT_FIELDS.keys())
async def test_text_with_nul_is_refused(harness: Harness, fields: dict[str, Any]) -> None:
    """A text field holding NUL is refused with ValueError; nothing is stored."""
    await _refused(harness, **fields)


@pytest.mark.parametrize("column", ["payload", "metadata"])
@pytest.mark.parametrize("document", NUL_DOCUMENTS.values(), ids=NUL_DOCUMENTS.keys())
async def test_json_with_nul_is_refused(
    harness: Harness, column: str, document: dict[str, JSON]
) -> None:
    """A payload or metadata string (key or value, at any depth) holding NUL is refused."""
    await _refused(harness, **{column: document})


async def test_json_with_an_escaped_backslash_before_u0000_is_stored(harness: Harness) -> None:
    """A literal backslash followed by ``u0000`` is no NUL: it is stored and read back unchanged."""
    text = "\\u0000 and \\\\u0000"
    job = new_job(payload={"s": text, "\\u0000": 1}, metadata={"m": "\\" + "u0000"})
    result = await harness.store.enqueue(job, now=EPOCH)
    got = await get(harness.store, result.job_id)
    assert dict(got.payload) == {"s": text, "\\u0000": 1}
    assert dict(got.metadata) == {"m": "\\u0000"}


@pytest.mark.parametrize(("field", "value"), BAD_INTEGERS, ids=lambda v: str(v))
async def test_integer_outside_its_column_is_refused(
    harness: Harness, field: str, value: int
) -> None:
    """priority outside int32, or max_attempts outside 1..int32, is refused with ValueError."""
    await _refused(harness, **{field: value})


async def test_integer_bounds_are_stored(harness: Harness) -> None:
    """The int32 extremes of priority, and max_attempts 1 and INT32_MAX, read back unchanged."""
    store = harness.store
    for priority, max_attempts in [(INT32_MAX, 1), (INT32_MIN, INT32_MAX)]:
        job = new_job(priority=priority, max_attempts=max_attempts)
        got = await get(store, (await store.enqueue(job, now=EPOCH)).job_id)
        assert (got.priority, got.max_attempts) == (priority, max_attempts)


@pytest.mark.parametrize("size", [2, 250], ids=["small", "big"])
@pytest.mark.parametrize(
    "bad",
    [
        {"queue": f"q{NUL}"},
        {"payload": {"s": NUL}},
        {"metadata": {"s": NUL}},
        {"priority": INT32_MAX + 1},
        {"max_attempts": 0},
    ],
    ids=["queue", "payload", "metadata", "priority", "max_attempts"],
)
async def test_a_batch_with_one_unstorable_job_stores_nothing(
    harness: Harness, size: int, bad: dict[str, Any]
) -> None:
    """enqueue_many refuses a whole batch (small, or big enough to bulk-load) for one bad job."""
    jobs = [new_job(payload={"i": i}) for i in range(size)]
    jobs[-1] = new_job(**bad)
    with pytest.raises(ValueError, match=REFUSAL):
        await harness.store.enqueue_many(jobs, now=EPOCH)
    assert await harness.store.count_active() == 0


async def test_a_keyed_batch_with_one_unstorable_key_stores_nothing(harness: Harness) -> None:
    """A batch of keyed jobs, one key holding NUL, is refused whole."""
    jobs = [new_job(identity_key=f"k{i}") for i in range(3)] + [new_job(identity_key=NUL)]
    with pytest.raises(ValueError, match=REFUSAL):
        await harness.store.enqueue_many(jobs, now=EPOCH)
    assert await harness.store.count_active() == 0


async def test_a_result_with_nul_is_refused_and_the_job_stays_running(harness: Harness) -> None:
    """finish with a result holding NUL raises ValueError and leaves the job running, owned."""
    store = harness.store
    claimed = await enqueue_and_claim(store)
    bad = Finish(lease=claimed.lease, status=JobStatus.SUCCEEDED, result={"r": NUL}, now=at(1))
    with pytest.raises(ValueError, match=REFUSAL):
        await store.finish(bad)
    with pytest.raises(ValueError, match=REFUSAL):
        await store.finish_many([bad])
    got = await get(store, claimed.id)
    assert (got.status, got.fencing_token, got.result) == (
        JobStatus.RUNNING,
        claimed.fencing_token,
        None,
    )


def _worker(**fields: Any) -> WorkerInfo:
    values: dict[str, Any] = {"worker_id": "w", "hostname": "h", "pid": 1, "queues": ["default"]}
    return WorkerInfo(**{**values, **fields})


async def test_a_worker_registration_holding_nul_is_refused(harness: Harness) -> None:
    """Worker ids, hostnames, queue and actor names are text too: NUL is refused (the
    registration cannot even be built), and nothing is registered."""
    store = harness.store
    for fields in (
        {"worker_id": f"w{NUL}1"},
        {"hostname": f"h{NUL}"},
        {"queues": [f"q{NUL}"]},
        {"actors": [f"a{NUL}"]},
        {"worker_label": NUL},
    ):
        with pytest.raises(ValueError, match=REFUSAL):
            _worker(**fields)
    await store.register_worker(_worker(), now=EPOCH)  # the same without NUL is fine
    assert [w.worker_id for w in await store.list_workers()] == ["w"]


async def test_a_queue_mode_or_actor_config_holding_nul_is_refused(harness: Harness) -> None:
    """Operator writes follow the same rule: nothing is stored."""
    store = harness.store
    with pytest.raises(ValueError, match=REFUSAL):
        await store.set_queue_mode(f"q{NUL}", QueueMode.ROUND_ROBIN)
    with pytest.raises(ValueError, match=REFUSAL):
        await store.sync_actor_configs([ActorConfig(actor=f"a{NUL}", queue="default")])
    with pytest.raises(ValueError, match=REFUSAL):
        await store.sync_actor_configs([ActorConfig(actor="a", queue=f"q{NUL}")])
    assert await store.queue_modes() == {}
    assert await store.list_actor_configs() == []


#: A lone surrogate: a Python str may hold one, UTF-8 (and so Postgres) cannot.
LONE = "\ud800"
SURROGATE_TEXT_FIELDS: dict[str, dict[str, Any]] = {
    "queue": {"queue": f"q{LONE}"},
    "actor": {"actor": f"{LONE}a"},
    "fairness_key": {"fairness_key": LONE},
    "tags": {"tags": (f"t{LONE}",)},
}


@pytest.mark.parametrize("fields", SURROGATE_TEXT_FIELDS.values(), ids=SURROGATE_TEXT_FIELDS.keys())
async def test_text_with_a_lone_surrogate_is_refused(
    harness: Harness, fields: dict[str, Any]
) -> None:
    """Text that is not valid Unicode is refused with ValueError; nothing is stored."""
    with pytest.raises(ValueError, match=r"(?i)surrogate|utf-?8|encode"):
        await harness.store.enqueue(new_job(**fields), now=EPOCH)
    assert await harness.store.count_active() == 0


@pytest.mark.parametrize("document", [{"s": LONE}, {LONE: 1}, {"n": [f"x{LONE}y"]}])
async def test_json_with_a_lone_surrogate_is_refused(
    harness: Harness, document: dict[str, JSON]
) -> None:
    """jsonb refuses an unpaired surrogate escape: so does every store."""
    with pytest.raises(ValueError, match=r"(?i)surrogate|utf-?8|encode|unicode"):
        await harness.store.enqueue(new_job(payload=document), now=EPOCH)
    assert await harness.store.count_active() == 0


async def test_json_with_a_surrogate_pair_is_stored(harness: Harness) -> None:
    """A character outside the BMP (a surrogate pair once escaped) is ordinary text."""
    document: dict[str, JSON] = {
        "emoji": "\U0001f600",
        "pair": "\ud83d\ude00".encode("utf-16", "surrogatepass").decode("utf-16"),
    }
    job_id = (await harness.store.enqueue(new_job(payload=document), now=EPOCH)).job_id
    assert dict((await get(harness.store, job_id)).payload) == document


#: The longest names (queue, actor) and keys (identity, idempotency, fairness) a store
#: takes: what fits Postgres's btree entries (2,704 bytes) with four bytes a character.
MAX_NAME = 200
MAX_KEY = 400
#: A character of four UTF-8 bytes: the widest a name or key can be.
WIDE = "\U0001d11e"
TOO_LONG: dict[str, dict[str, Any]] = {
    "queue": {"queue": "q" * (MAX_NAME + 1)},
    "actor": {"actor": "a" * (MAX_NAME + 1)},
    "identity_key": {"identity_key": "k" * (MAX_KEY + 1)},
    "idempotency_key": {"idempotency_key": "i" * (MAX_KEY + 1)},
    "fairness_key": {"fairness_key": "f" * (MAX_KEY + 1)},
}


@pytest.mark.parametrize("fields", TOO_LONG.values(), ids=TOO_LONG.keys())
async def test_a_name_or_key_too_long_for_an_index_is_refused(
    harness: Harness, fields: dict[str, Any]
) -> None:
    """One character past the limit is refused with ValueError naming the field and the
    limit (Postgres would refuse the index entry with an error of its own); nothing is
    stored, alone or in a batch."""
    [name] = fields
    match = rf"{name} is {MAX_NAME + 1 if name in ('queue', 'actor') else MAX_KEY + 1} characters"
    with pytest.raises(ValueError, match=match):
        await harness.store.enqueue(new_job(**fields), now=EPOCH)
    with pytest.raises(ValueError, match=match):
        await harness.store.enqueue_many([new_job(), new_job(**fields)], now=EPOCH)
    assert await harness.store.count_active() == 0


async def test_the_longest_names_and_keys_of_the_widest_characters_are_stored(
    harness: Harness,
) -> None:
    """At the limits, in four-byte characters, every name and key is stored and found:
    the limits fit every index they enter."""
    store = harness.store
    job = new_job(
        actor=WIDE * MAX_NAME,
        queue=WIDE * MAX_NAME,
        identity_key=WIDE * MAX_KEY,
        idempotency_key=(WIDE * MAX_KEY)[:-1] + "i",
        fairness_key=WIDE * MAX_KEY,
    )
    first = await store.enqueue(job, now=EPOCH)
    again = await store.enqueue(job, now=EPOCH)
    assert (again.job_id, again.was_existing) == (first.job_id, True)
    stored = await get(store, first.job_id)
    assert (stored.actor, stored.queue, stored.fairness_key) == (
        job.actor,
        job.queue,
        job.fairness_key,
    )


async def test_a_queue_mode_or_actor_config_name_too_long_is_refused(harness: Harness) -> None:
    """Too long a name is refused, and so is an empty queue name for a mode (a stray
    row `queues list` would show for ever)."""
    store = harness.store
    with pytest.raises(ValueError, match=rf"queue is {MAX_NAME + 1} characters"):
        await store.set_queue_mode("q" * (MAX_NAME + 1), QueueMode.ROUND_ROBIN)
    with pytest.raises(ValueError, match=r"queue mode\.queue is empty"):
        await store.set_queue_mode("", QueueMode.ROUND_ROBIN)
    with pytest.raises(ValueError, match=rf"actor is {MAX_NAME + 1} characters"):
        await store.sync_actor_configs([ActorConfig(actor="a" * (MAX_NAME + 1), queue="default")])
    assert await store.queue_modes() == {}
    assert await store.list_actor_configs() == []
