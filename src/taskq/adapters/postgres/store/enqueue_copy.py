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

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Final

from taskq.adapters.postgres.store.rows import dump_json_object
from taskq.domain.job import NewJob

#: The columns a COPY row carries, in row order; the others take their defaults.
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
)

NULL: Final = "\\N"
# COPY text format: backslash, and the row and column separators, are escaped.
_TEXT_ESCAPES: Final = str.maketrans({"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"})


def _text(value: str) -> str:
    return value.translate(_TEXT_ESCAPES)


def _optional_text(value: str | None) -> str:
    return NULL if value is None else _text(value)


def _timestamp(value: datetime | None) -> str:
    return NULL if value is None else value.isoformat()


def _json(text: str) -> str:
    # The encoder writes ASCII only, control characters escaped: a backslash is all
    # COPY could misread.
    return text.replace("\\", "\\\\") if "\\" in text else text


def _tags(tags: Sequence[str]) -> str:
    if not tags:
        return "{}"
    quoted = ",".join('"' + t.replace("\\", "\\\\").replace('"', '\\"') + '"' for t in tags)
    return _text("{" + quoted + "}")


def _options(job: NewJob, now: datetime, now_text: str) -> str:
    """Everything after the payload in ``job``'s row (COPY_COLUMNS from ``queue``)."""
    scheduled = job.scheduled_at is not None and job.scheduled_at > now
    max_attempts = job.max_attempts
    return "\t".join(
        (
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
        )
    )


#: Rows per chunk of a streamed COPY: big enough that framing costs nothing, small
#: enough that the server loads one chunk while the next is rendered.
CHUNK_ROWS: Final = 1_000


def copy_chunks(
    jobs: Sequence[NewJob], ids: Sequence[int], now: datetime, *, rows: int = CHUNK_ROWS
) -> Iterator[bytes]:
    """The COPY rows of ``jobs`` with ``ids`` (one each, in order), enqueued at ``now``,
    rendered ``rows`` at a time as they are consumed.

    A value JSON cannot hold raises ``TypeError``/``ValueError`` from the chunk
    that holds it, which aborts the COPY: nothing is written.
    """
    if len(ids) != len(jobs):
        raise AssertionError(f"{len(ids)} ids for {len(jobs)} jobs")
    now_text = now.isoformat()
    rendered: dict[tuple[object, ...], str] = {}
    for start in range(0, len(jobs), rows):
        yield _render(
            jobs[start : start + rows], ids[start : start + rows], now, now_text, rendered
        )


def copy_text(jobs: Sequence[NewJob], ids: Sequence[int], now: datetime) -> bytes:
    """All of :func:`copy_chunks` at once."""
    return b"".join(copy_chunks(jobs, ids, now))


def _render(
    jobs: Sequence[NewJob],
    ids: Sequence[int],
    now: datetime,
    now_text: str,
    rendered: dict[tuple[object, ...], str],
) -> bytes:
    encode = dump_json_object
    lines: list[str] = []
    append = lines.append
    for job, job_id in zip(jobs, ids, strict=True):
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
        )
        options = rendered.get(key)
        if options is None:
            options = rendered[key] = _options(job, now, now_text)
        payload = encode(job.payload)
        if "\\" in payload:
            payload = payload.replace("\\", "\\\\")
        append(f"{job_id}\t{payload}\t{options}\n")
    return "".join(lines).encode()


__all__ = ["CHUNK_ROWS", "COPY_COLUMNS", "copy_chunks", "copy_text"]
