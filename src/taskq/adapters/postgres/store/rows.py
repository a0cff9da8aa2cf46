"""Rows of the store's queries → domain types, and Python values → query parameters.

JSON travels as text in both directions (``payload::text``, ``:payload::text``):
the core serialises and parses it, so the store behaves the same on any pool,
whatever jsonb codec the pool's connections have (or lack).
"""

from __future__ import annotations

import json
import json.scanner
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, Final, cast

from taskq.adapters.postgres.driver import Row
from taskq.domain.actor_config import ActorConfig
from taskq.domain.cancel_phase import CancelPhase
from taskq.domain.job import JSON, AttemptRecord, ClaimedJob, Job, build_claimed_job
from taskq.domain.status import JobStatus
from taskq.ports.store_params import WorkerRecord

# One encoder for every call: json.dumps with options builds a new one each time.
_encoder = json.JSONEncoder(allow_nan=False, separators=(",", ":"))
_encode = _encoder.encode


def _c_object_encoder() -> Callable[[dict[str, JSON]], str] | None:
    """What ``_encode`` runs for a dict, minus the encoder it builds per call (half the cost).

    ``json.encoder.c_make_encoder`` with the arguments ``JSONEncoder.iterencode``
    gives it, built once. Its ``markers`` (the circular-reference check) empty
    themselves after each value; they are cleared after a failure too. ``None``
    when this Python has no C encoder or it behaves otherwise (``_encode`` then).
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    markers: dict[int, object] = {}
    try:
        run = make(
            markers,
            _encoder.default,
            json.encoder.encode_basestring_ascii,
            None,
            _encoder.key_separator,
            _encoder.item_separator,
            _encoder.sort_keys,
            _encoder.skipkeys,
            _encoder.allow_nan,
        )
    except TypeError:
        return None

    def encode(value: dict[str, JSON]) -> str:
        try:
            return "".join(run(value, 0))
        except BaseException:
            markers.clear()
            raise

    sample = {"a": [1, 2.5, None, True, "\u00e9\n", {"b": -0.0}]}
    try:
        same = encode(sample) == _encode(sample)
    except (TypeError, ValueError):
        same = False
    return encode if same else None


_encode_object: Final = _c_object_encoder() or _encode

#: An empty JSON object, the default of payload and metadata.
EMPTY_OBJECT = "{}"


def dump_json(value: JSON) -> str:
    """``value`` as JSON text; raises ``TypeError``/``ValueError`` for what JSON cannot hold.

    NaN and infinities are refused (jsonb cannot store them), as the memory
    adapter refuses them, so a bad value fails before anything is written.
    """
    return _encode(value)


def plain_object(value: Mapping[str, JSON]) -> dict[str, JSON]:
    """A mapping as the ``dict`` the JSON encoder takes (no copy when it already is one)."""
    return value if type(value) is dict else dict(value)


def dump_json_object(value: Mapping[str, JSON]) -> str:
    """A JSON object column value (payload, metadata)."""
    if not value:
        return EMPTY_OBJECT
    return _encode_object(plain_object(value))


def dump_optional_json(value: JSON) -> str | None:
    """A nullable JSON column value: ``None`` is SQL NULL."""
    return None if value is None else dump_json(value)


def _c_scanner() -> Callable[[str, int], tuple[Any, int]] | None:
    """The C scanner ``json.loads`` ends in, called without its Python layers (two
    whitespace regex matches and two frames per value): a column's JSON text is
    exactly one value. None when this Python has no C scanner."""
    make = getattr(json.scanner, "c_make_scanner", None)
    return None if make is None else make(json.JSONDecoder())


_scan: Final = _c_scanner()


def load_json(text: str | None) -> JSON:
    if text is None:
        return None
    if _scan is not None:
        try:
            value, end = _scan(text, 0)
        except (StopIteration, ValueError):
            pass  # json.loads gives the error its usual form
        else:
            if end == len(text):
                return cast(JSON, value)
    return cast(JSON, json.loads(text))  # surrounding whitespace, or the error


def load_json_object(text: str | None) -> dict[str, JSON]:
    if text == EMPTY_OBJECT:
        return {}  # most metadata: no parse
    value = load_json(text)
    return value if isinstance(value, dict) else {}


def job_from_row(row: Row) -> Job:
    try:
        return _job_from_row(row)
    except RecursionError:
        raise ValueError(
            f"job {row['id']}: a stored JSON column (payload, metadata or result) is nested "
            "too deeply to decode"
        ) from None


def _job_from_row(row: Row) -> Job:
    return Job(
        id=row["id"],
        queue=row["queue"],
        actor=row["actor"],
        payload=load_json_object(row["payload"]),
        status=JobStatus(row["status"]),
        priority=row["priority"],
        attempt=row["attempt"],
        max_attempts=row["max_attempts"],
        fencing_token=row["fencing_token"],
        created_at=row["created_at"],
        scheduled_at=row["scheduled_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        locked_by=row["locked_by"],
        lock_expires_at=row["lock_expires_at"],
        cancel_phase=CancelPhase(row["cancel_phase"]),
        cancel_requested_at=row["cancel_requested_at"],
        schedule_to_close=row["schedule_to_close"],
        identity_key=row["identity_key"],
        fairness_key=row["fairness_key"],
        idempotency_key=row["idempotency_key"],
        metadata=load_json_object(row["metadata"]),
        tags=tuple(row["tags"]),
        result=load_json(row["result"]),
        result_expires_at=row["result_expires_at"],
        last_error=row["last_error"],
        trace_id=row["trace_id"],
        span_id=row["span_id"],
        attempt_timeout=row["attempt_timeout"],
    )


def _read_column(text: str | None, column: str) -> tuple[dict[str, JSON], str | None]:
    """A JSON object column of a claimed job, or {} and why it cannot be read."""
    try:
        value = load_json_object(text) if column == "metadata" else load_json(text)
    except RecursionError:
        return {}, f"the stored {column} is nested too deeply to decode"
    except ValueError as exc:
        return {}, f"the stored {column} is not valid JSON ({exc})"
    if isinstance(value, dict):
        return value, None
    kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return {}, f"the stored {column} is {kind.get(type(value), 'a number')}, not a JSON object"


def claimed_from_row(row: Row) -> ClaimedJob:
    try:
        payload = load_json(row["payload"])
        metadata = load_json_object(row["metadata"])
    except (RecursionError, ValueError):
        payload = None  # said below, column by column
    if type(payload) is not dict:
        # A row TaskQ did not write: handed over all the same, saying why, so the worker
        # fails that job alone (one such row must not fail a claim).
        payload, payload_problem = _read_column(row["payload"], "payload")
        metadata, metadata_problem = _read_column(row["metadata"], "metadata")
        why = "; ".join(filter(None, (payload_problem, metadata_problem)))
        return _claimed(row, payload, metadata, why)
    return _claimed(row, payload, metadata, None)


def _claimed(
    row: Row, payload: dict[str, JSON], metadata: dict[str, JSON], unreadable: str | None
) -> ClaimedJob:
    return build_claimed_job(
        id=row["id"],
        queue=row["queue"],
        actor=row["actor"],
        payload=payload,
        priority=row["priority"],
        attempt=row["attempt"],
        max_attempts=row["max_attempts"],
        fencing_token=row["fencing_token"],
        scheduled_at=row["scheduled_at"],
        lock_expires_at=row["lock_expires_at"],
        schedule_to_close=row["schedule_to_close"],
        fairness_key=row["fairness_key"],
        metadata=metadata,
        trace_id=row["trace_id"],
        span_id=row["span_id"],
        unreadable=unreadable,
        started=row["started"],
        attempt_timeout=row["attempt_timeout"],
    )


def attempt_from_row(row: Row) -> AttemptRecord:
    return AttemptRecord(
        job_id=row["job_id"],
        attempt=row["attempt"],
        worker_id=row["worker_id"],
        outcome=row["outcome"],
        error_class=row["error_class"],
        error=row["error"],
        finished_at=row["finished_at"],
        started_at=row["started_at"],
        traceback=row["traceback"],
    )


def worker_from_row(row: Row) -> WorkerRecord:
    return WorkerRecord(
        worker_id=row["worker_id"],
        hostname=row["hostname"],
        pid=row["pid"],
        queues=tuple(row["queues"]),
        started_at=row["started_at"],
        last_seen_at=row["last_seen_at"],
        worker_label=row["worker_label"],
        workgroup_instance=row["workgroup_instance"],
    )


def actor_config_from_row(row: Row) -> ActorConfig:
    return ActorConfig(
        actor=row["actor"],
        queue=row["queue"],
        metadata=load_json_object(row["metadata"]),
        max_concurrent=row["max_concurrent"],
        max_pending=row["max_pending"],
        result_ttl=_timedelta(row["result_ttl"]),
    )


def _timedelta(value: Any) -> timedelta | None:
    if value is None or isinstance(value, timedelta):
        return value
    raise TypeError(f"expected an interval as timedelta, got {type(value).__name__}")


def check_aware(now: datetime | None) -> datetime | None:
    """``now`` unchanged, or ``ValueError`` when it is naive (as the memory adapter)."""
    if now is not None and now.tzinfo is None:
        raise ValueError(f"now must be timezone-aware, got {now!r}")
    return now


def check_lease(lease: timedelta) -> timedelta:
    if lease <= timedelta(0):
        raise ValueError(f"lease must be > 0, got {lease}")
    return lease


__all__ = [
    "EMPTY_OBJECT",
    "actor_config_from_row",
    "attempt_from_row",
    "check_aware",
    "check_lease",
    "claimed_from_row",
    "dump_json",
    "dump_json_object",
    "dump_optional_json",
    "job_from_row",
    "load_json",
    "load_json_object",
    "plain_object",
    "worker_from_row",
]
