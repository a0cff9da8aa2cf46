"""A batch of new jobs as ``COPY … FROM STDIN`` text: the cheapest way in for big batches.

``COPY`` costs the server about half of what the array-expanding
``insert_jobs`` statement does per row, but it cannot compute anything: ids
(reserved beforehand from the jobs' sequence), status, ``created_at`` and
``scheduled_at`` arrive as literal values, computed here exactly as
``insert_jobs`` computes them. Text format needs no per-column codec, so a
pool's own jsonb codec never interferes.

Jobs of one ``enqueue_many`` call share every option but the payload, so each
distinct set of options is rendered once and each row costs one JSON encode.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from taskq.adapters.postgres.store.rows import dump_json_object
from taskq.domain.job import JSON, NewJob

#: Every column a COPY row can carry, in row order; the others take their defaults.
COPY_COLUMNS: Final = (
    "id",
    "payload",
    "queue",
    "actor",
    "status",
    "priority",
    "max_attempts",
    "created_at",
    "scheduled_at",
    "schedule_to_close",
    "fairness_key",
    "metadata",
    "tags",
    "trace_id",
    "span_id",
    "attempt_timeout",
)
#: The columns every row carries; a batch sends the others only when a job sets them
#: (each value the server need not parse is a saving on every row).
_ALWAYS: Final = 6

NULL: Final = "\\N"
# COPY text format: backslash, and the row and column separators, are escaped.
_TEXT_ESCAPES: Final = str.maketrans({"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"})


def _text(value: str) -> str:
    return value.translate(_TEXT_ESCAPES)


def _optional_text(value: str | None) -> str:
    return NULL if value is None else _text(value)


def _timestamp(value: datetime | None) -> str:
    return NULL if value is None else value.isoformat()


def _interval(value: timedelta | None) -> str:
    # Exact in microseconds, whatever the server's IntervalStyle.
    if value is None:
        return NULL
    return f"{value.days} days {value.seconds} seconds {value.microseconds} microseconds"


def _json(text: str) -> str:
    # The encoder writes ASCII only, control characters escaped: a backslash is all
    # COPY could misread.
    return text.replace("\\", "\\\\") if "\\" in text else text


def _tags(tags: Sequence[str]) -> str:
    if not tags:
        return "{}"
    quoted = ",".join('"' + t.replace("\\", "\\\\").replace('"', '\\"') + '"' for t in tags)
    return _text("{" + quoted + "}")


def _options(job: NewJob, now: datetime, now_text: str) -> tuple[str, ...]:
    """``job``'s values for COPY_COLUMNS from ``queue`` on."""
    scheduled = job.scheduled_at is not None and job.scheduled_at > now
    max_attempts = job.max_attempts
    return (
        _text(job.queue),
        _text(job.actor),
        "scheduled" if scheduled else "pending",
        str(int(job.priority)),
        NULL if max_attempts is None else str(int(max_attempts)),
        now_text,
        _timestamp(job.scheduled_at) if scheduled else now_text,
        _timestamp(job.schedule_to_close),
        _optional_text(job.fairness_key),
        _json(dump_json_object(job.metadata)),
        _tags(job.tags),
        _optional_text(job.trace_id),
        _optional_text(job.span_id),
        _interval(job.attempt_timeout),
    )


#: Left to the server's default (now()) when the database clock is the enqueue time.
_CLOCK_COLUMNS: Final = ("created_at", "scheduled_at")


def _defaults(now_text: str) -> tuple[str, ...]:
    """Each optional column's default (COPY_COLUMNS from max_attempts); the clock columns
    are decided apart."""
    return (NULL, now_text, now_text, NULL, NULL, "{}", "{}", NULL, NULL, NULL)


@dataclass(frozen=True, slots=True)
class CopyPlan:
    """The columns a batch's COPY sends, and each distinct set of options rendered once."""

    columns: tuple[str, ...]
    #: Per job, the tab-joined values of ``columns`` after the payload.
    options: list[str]


def plan_copy(jobs: Sequence[NewJob], now: datetime, *, clock_given: bool) -> CopyPlan:
    """Which columns ``jobs`` need and their rendered options.

    Optional columns every job leaves at the default are left out (the server
    fills them); ``created_at``/``scheduled_at`` too when the database clock is
    the enqueue time (``clock_given`` false) and no job is scheduled ahead.
    """
    now_text = now.isoformat()
    rendered: dict[tuple[object, ...], tuple[str, ...]] = {}
    keys: list[tuple[object, ...]] = []
    append = keys.append
    for job in jobs:
        # Mutable options are keyed by identity: every job is alive, so ids are unique.
        key = (
            job.queue,
            job.actor,
            job.priority,
            job.max_attempts,
            job.scheduled_at,
            job.schedule_to_close,
            job.fairness_key,
            id(job.metadata),
            id(job.tags),
            job.trace_id,
            job.span_id,
            job.attempt_timeout,
        )
        if key not in rendered:
            rendered[key] = _options(job, now, now_text)
        append(key)
    defaults = _defaults(now_text)
    timed = clock_given or any(key[4] is not None for key in rendered)  # a scheduled_at
    keep = [
        index
        for index in range(_ALWAYS, len(COPY_COLUMNS))
        if (
            timed
            if COPY_COLUMNS[index] in _CLOCK_COLUMNS
            else any(values[index - 2] != defaults[index - _ALWAYS] for values in rendered.values())
        )
    ]
    picks = list(range(2, _ALWAYS)) + keep
    joined = {key: "\t".join(values[i - 2] for i in picks) for key, values in rendered.items()}
    return CopyPlan(
        columns=COPY_COLUMNS[:_ALWAYS] + tuple(COPY_COLUMNS[i] for i in keep),
        options=[joined[key] for key in keys],
    )


#: Rows per chunk of a streamed COPY: big enough that framing costs nothing, small
#: enough that the server loads one chunk while the next is rendered.
CHUNK_ROWS: Final = 500


def copy_chunks(
    payloads: Sequence[Mapping[str, JSON]],
    ids: Sequence[int],
    options: Sequence[str] | str,
    *,
    rows: int = CHUNK_ROWS,
) -> Iterator[bytes]:
    """COPY rows, one per payload with its id and its rendered ``options`` (one string
    for all when every job shares them), ``rows`` at a time as they are consumed.

    A payload JSON cannot hold raises ``TypeError``/``ValueError`` from the chunk
    that holds it, which aborts the COPY: nothing is written.
    """
    shared = isinstance(options, str)
    if len(ids) != len(payloads) or (not shared and len(options) != len(payloads)):
        raise AssertionError(f"{len(ids)} ids and options for {len(payloads)} payloads")
    for start in range(0, len(payloads), rows):
        end = start + rows
        rest = itertools.repeat(options) if isinstance(options, str) else options[start:end]
        yield _render(payloads[start:end], ids[start:end], rest)


def _render(
    payloads: Sequence[Mapping[str, JSON]], ids: Sequence[int], options: Iterable[str]
) -> bytes:
    encode = dump_json_object
    lines: list[str] = []
    append = lines.append
    for payload, job_id, rest in zip(payloads, ids, options, strict=False):  # options may repeat
        text = encode(payload)
        if "\\" in text:
            text = text.replace("\\", "\\\\")
        append(f"{job_id}\t{text}\t{rest}\n")
    return "".join(lines).encode()


__all__ = ["CHUNK_ROWS", "COPY_COLUMNS", "CopyPlan", "copy_chunks", "plan_copy"]
