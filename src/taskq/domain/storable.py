"""What every store can hold: the portable limits on a new job's values.

Postgres sets them: ``text`` cannot hold NUL, ``jsonb`` refuses the
``\\u0000`` escape, integer columns are 32-bit and ``max_attempts`` is at least
1 (a check constraint). The memory adapter keeps the same limits, so an
application test fails where production would, and the Postgres store checks
them before it sends a statement the server would refuse. A value past them
raises ``ValueError``, which is also what the drivers raise for a value the
database refuses.

The checks are a few C-level ``in`` tests and comparisons per job: they run on
every enqueue.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Final

from taskq.domain.actor_config import ActorConfig
from taskq.domain.job import NewJob, UniformJobs

INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1
NUL: Final = "\x00"

#: The longest queue and actor names, and identity, idempotency and fairness keys, in
#: characters: what fits Postgres's btree entries (2,704 bytes) at four UTF-8 bytes a
#: character, a name and a key in one entry (jobs_identity_key_uidx, jobs_cohort_idx).
MAX_NAME_LENGTH: Final = 200
MAX_KEY_LENGTH: Final = 400

#: The longest result_ttl: about 1,000 years keeps a result's expiry within what
#: Python's datetime (year 9999) and Postgres's timestamptz hold, for millennia.
MAX_RESULT_TTL: Final = timedelta(days=365_250)
#: The longest attempt timeout (``@actor(timeout=...)``, ``enqueue(timeout=...)``), as long.
MAX_ATTEMPT_TIMEOUT: Final = MAX_RESULT_TTL

#: A ``\u0000`` escape in JSON text, not a literal backslash followed by ``u0000``:
#: the escape's backslash is preceded by whole ``\\`` pairs only.
_JSON_NUL_ESCAPE: Final = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def text_problem(value: str) -> str | None:
    """Why no store can keep ``value`` ("holds a NUL character", ...), or None."""
    if NUL in value:
        return "holds a NUL character"
    # A str may hold a lone surrogate; UTF-8, and so every store, cannot.
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "holds a lone surrogate (not valid Unicode)"
    return None


def storable_text(value: str) -> str:
    """``value`` with what no store can keep written visibly: NUL as ``\\x00``, a lone
    surrogate as ``\\udcff``. For words that must land whatever they hold (error texts)."""
    value = value.replace(NUL, "\\x00")
    if value.isascii():
        return value
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


def _check_text(owner: str, field: str, value: str) -> None:
    """Raise ``ValueError`` naming ``owner.field`` when ``value`` is text no store can keep."""
    problem = text_problem(value)
    if problem is not None:
        raise ValueError(f"{owner}.{field} {problem}, which no store can keep")


def _nul_in(field: str, value: str | None) -> None:
    if value is not None:
        _check_text("NewJob", field, value)


def _too_long(owner: str, field: str, value: str, limit: int) -> None:
    if len(value) > limit:
        hint = " (hash a longer key)" if limit == MAX_KEY_LENGTH else ""
        raise ValueError(
            f"{owner}.{field} is {len(value):,} characters; at most {limit} fit a store's "
            f"index{hint}"
        )


def check_names(owner: str, **names: str) -> None:
    """Raise ``ValueError`` naming ``owner.<field>`` for a queue or actor name longer
    than :data:`MAX_NAME_LENGTH`."""
    for field, value in names.items():
        _too_long(owner, field, value, MAX_NAME_LENGTH)


def check_new_job(job: NewJob) -> None:
    """Raise ``ValueError`` naming the field when ``job`` holds a value no store can keep.

    Payload and metadata are checked where they are serialised
    (:func:`check_json_text`), so each is encoded once.
    """
    if len(job.queue) > MAX_NAME_LENGTH or len(job.actor) > MAX_NAME_LENGTH:
        check_names("NewJob", queue=job.queue, actor=job.actor)
    for field in ("identity_key", "idempotency_key", "fairness_key"):
        key = getattr(job, field)
        if key is not None and len(key) > MAX_KEY_LENGTH:
            _too_long("NewJob", field, key, MAX_KEY_LENGTH)
    if NUL in job.queue or NUL in job.actor or not (job.queue + job.actor).isascii():
        _nul_in("queue", job.queue)
        _nul_in("actor", job.actor)
    if job.identity_key is not None or job.idempotency_key is not None:
        _nul_in("identity_key", job.identity_key)
        _nul_in("idempotency_key", job.idempotency_key)
    _nul_in("fairness_key", job.fairness_key)
    if job.trace_id is not None or job.span_id is not None:
        _nul_in("trace_id", job.trace_id)
        _nul_in("span_id", job.span_id)
    if job.tags:
        _check_text("NewJob", "tags", "".join(job.tags))
    if not INT32_MIN <= job.priority <= INT32_MAX:
        raise ValueError(
            f"NewJob.priority must be within [{INT32_MIN}, {INT32_MAX}], got {job.priority}"
        )
    if job.scheduled_at is not None or job.schedule_to_close is not None:
        _check_instant("scheduled_at", job.scheduled_at)
        _check_instant("schedule_to_close", job.schedule_to_close)
    attempts = job.max_attempts
    if attempts is not None and not 1 <= attempts <= INT32_MAX:
        raise ValueError(
            f"NewJob.max_attempts must be None or within [1, {INT32_MAX}], got {attempts}"
        )
    if job.attempt_timeout is not None:
        problem = timeout_problem(job.attempt_timeout)
        if problem is not None:
            raise ValueError(f"NewJob.attempt_timeout {problem}")


def timeout_problem(value: object) -> str | None:
    """Why ``value`` cannot bound an attempt (a positive ``timedelta`` of at most
    :data:`MAX_ATTEMPT_TIMEOUT`), or None when it can."""
    if not isinstance(value, timedelta):
        return (
            f"must be a datetime.timedelta (e.g. timedelta(seconds=30)), "
            f"got {type(value).__name__} {value!r}"
        )
    if value <= timedelta(0):
        return f"must be a positive timedelta, got {value!r}"
    if value > MAX_ATTEMPT_TIMEOUT:
        return (
            f"is at most {MAX_ATTEMPT_TIMEOUT.days:,} days (about 1,000 years, what every "
            f"store and timer holds), got {value!r}"
        )
    return None


def capacity_count_problem(value: int) -> str | None:
    """Why a stored ``max_concurrent`` or ``max_pending`` cannot be kept (negative, or
    past :data:`INT32_MAX`, what a store's integer column holds), or None."""
    if value < 0:
        return f"must not be negative, got {value:,}"
    if value > INT32_MAX:
        return f"is at most {INT32_MAX:,} (what a store's integer column holds), got {value:,}"
    return None


def result_ttl_problem(value: timedelta) -> str | None:
    """Why a stored ``result_ttl`` cannot be kept (negative, or past
    :data:`MAX_RESULT_TTL`: its expiry would be a time no reader can load), or None."""
    if value < timedelta(0):
        return f"must not be negative, got {value!r}"
    if value > MAX_RESULT_TTL:
        return (
            f"is at most {MAX_RESULT_TTL.days:,} days (about 1,000 years, so a result's "
            f"expiry stays a time every store holds), got {value.days:,} days"
        )
    return None


def _check_instant(field: str, value: datetime | None) -> None:
    """Raise ``ValueError`` naming ``NewJob.field`` when its UTC time is outside years
    1..9999: Postgres would store it, but no reader (Python's datetime) could load it."""
    if value is None or value.utcoffset() is None:
        return
    try:
        value.astimezone(UTC)
    except OverflowError:
        raise ValueError(
            f"NewJob.{field} is {value.isoformat()}, outside years 1..9999 in UTC: "
            "a job holding it could not be read back"
        ) from None


def check_new_jobs(jobs: Iterable[NewJob]) -> None:
    """:func:`check_new_job` for each job, before anything is written."""
    if isinstance(jobs, UniformJobs):
        check_new_job(jobs.template)  # the only options there are; payloads: see above
        return
    for job in jobs:
        check_new_job(job)


def check_texts(what: str, **values: str | Iterable[str] | None) -> None:
    """Raise ``ValueError`` naming ``what.<field>`` when a text value holds a NUL.

    For the other rows stores keep (workers, actor configs, queue modes): an
    operator's or a worker's text, refused alike by every store.
    """
    for name, value in values.items():
        if value is None:
            continue
        for text in (value,) if isinstance(value, str) else value:
            _check_text(what, name, text)


def check_queue_mode(queue: str) -> None:
    """What every store checks of a queue mode's queue name: not empty, its text and its
    length."""
    if not queue:
        raise ValueError("queue mode.queue is empty: name a queue")
    check_texts("queue mode", queue=queue)
    check_names("queue mode", queue=queue)


def check_actor_configs(configs: Iterable[ActorConfig]) -> None:
    """:func:`check_texts` for actor configs (their names and queues), and their
    capacity within what a store holds (:data:`MAX_RESULT_TTL`, :data:`INT32_MAX`)."""
    for config in configs:
        check_texts("ActorConfig", actor=config.actor, queue=config.queue)
        check_names("ActorConfig", actor=config.actor, queue=config.queue)
        if config.result_ttl is not None:
            problem = result_ttl_problem(config.result_ttl)
            if problem is not None:
                raise ValueError(f"ActorConfig.result_ttl {problem}")
        for name in ("max_concurrent", "max_pending"):
            count = getattr(config, name)
            if count is not None and (problem := capacity_count_problem(count)) is not None:
                raise ValueError(f"ActorConfig.{name} {problem}")


def check_json_text(text: str, what: str) -> None:
    """Raise ``ValueError`` when JSON ``text`` encodes a NUL (``jsonb`` refuses ``\\u0000``).

    ``text`` is JSON as the standard encoders write it: NUL only ever appears
    as the ``\\u0000`` escape.
    """
    if "\\u0000" in text and _JSON_NUL_ESCAPE.search(text) is not None:
        raise ValueError(f"{what} holds a NUL character, which no store can keep")
    if ("\\ud" in text or "\\uD" in text) and _lone_surrogate(text):
        raise ValueError(
            f"{what} holds a lone surrogate (not valid Unicode), which no store can keep"
        )


#: A surrogate escape in JSON text (after whole ``\\`` pairs only): high or low.
_JSON_SURROGATE: Final = re.compile(r"(?<!\\)(?:\\\\)*\\u([dD][89abAB]|[dD][c-fC-F])[0-9a-fA-F]{2}")


def _lone_surrogate(text: str) -> bool:
    """True when JSON ``text`` has a surrogate escape that is not half of a pair."""
    expect_low_at = -1
    for match in _JSON_SURROGATE.finditer(text):
        escape_at = match.end() - 6
        high = match.group(1)[1].lower() in "89ab"
        if expect_low_at >= 0:
            if high or escape_at != expect_low_at:
                return True  # the high one before was alone
            expect_low_at = -1
        elif high:
            expect_low_at = match.end()
        else:
            return True  # a low one with no high one before it
    return expect_low_at >= 0


__all__ = [
    "INT32_MAX",
    "INT32_MIN",
    "MAX_ATTEMPT_TIMEOUT",
    "MAX_KEY_LENGTH",
    "MAX_NAME_LENGTH",
    "MAX_RESULT_TTL",
    "NUL",
    "capacity_count_problem",
    "check_json_text",
    "check_names",
    "check_new_job",
    "check_new_jobs",
    "check_queue_mode",
    "result_ttl_problem",
    "storable_text",
    "text_problem",
    "timeout_problem",
]
