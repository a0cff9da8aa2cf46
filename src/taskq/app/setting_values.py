"""How each ``TASKQ_*`` value is read and checked: parsers, field types, error messages.

The settings models (:mod:`taskq.app.settings`) declare their fields with the
types here; each type's validators turn an environment string (or a value from
code) into the field's value, or a ``ValueError`` saying what is accepted.
:func:`configuration_error` turns pydantic's errors into one
:class:`~taskq.domain.errors.ConfigurationError` naming each variable, never
echoing a secret.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import uuid
from collections.abc import Mapping
from datetime import timedelta
from typing import Annotated, Any, Final, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    TypeAdapter,
    ValidationError,
)
from pydantic_settings import NoDecode

from taskq.app.scheduling.sweep_cron import sweep_cron
from taskq.domain.errors import ConfigurationError, InvalidIdentifierError
from taskq.domain.settings_rules import parse_hhmm_utc, too_long, validate_identifier
from taskq.domain.storable import MAX_NAME_LENGTH

ENV_PREFIX: Final = "TASKQ_"
#: TASKQ_HEALTH_PG_PING_TIMEOUT must stay below this: the probe's 2 s, less room to answer.
MAX_HEALTH_PG_PING_TIMEOUT: Final = 1.5
#: Fields whose values may carry a password: never echoed in errors or reprs.
SECRET_FIELDS: Final = frozenset({"pg_dsn", "pg_dsn_direct", "pg_dsn_pooled", "redis_url"})


def env_var(field_name: str) -> str:
    """The environment variable behind a settings field (``lock_lease`` → ``TASKQ_LOCK_LEASE``)."""
    return ENV_PREFIX + field_name.upper()


# -- value parsers ----------------------------------------------------------------------


def _empty_to_none(value: object) -> object:
    # An exported-but-empty variable (common in Helm charts and .env templates)
    # means "not set" for every optional field.
    if isinstance(value, str) and not value.strip():
        return None
    return value


def _none_to_empty(value: object) -> object:
    return "" if value is None else value


def _pg_dsn(value: str) -> str:
    # Checked by hand rather than with pydantic's PostgresDsn, which refuses the
    # libpq unix-socket form ``postgresql:///db?host=/run/postgresql`` and accepts
    # SQLAlchemy dialect schemes that neither driver understands.
    text = value.strip()
    scheme, sep, rest = text.partition("://")
    if not sep or scheme.lower() not in {"postgres", "postgresql"}:
        raise ValueError("must be a postgresql:// (or postgres://) URL")
    if not rest or any(ch.isspace() for ch in rest):
        raise ValueError("must be a postgresql:// URL with a host or a database, without spaces")
    try:
        urlsplit(text)
    except ValueError as exc:  # e.g. "Invalid IPv6 URL" for an unclosed [
        raise ValueError(f"is not a valid URL: {exc}") from None
    return text


def _pg_dsn_or_unset(value: str) -> str:
    # Unset (no default DSN: a made-up one only fails later, naming a role nobody created);
    # a command or a client that connects refuses it with require_pg_dsn.
    return _pg_dsn(value) if value.strip() else ""


def missing_pg_dsn(*, flag: str | None = None) -> ConfigurationError:
    """The one-line error for a Postgres DSN nobody set (``flag``: an option that sets it)."""
    also = f", or pass {flag}" if flag else ""
    return ConfigurationError(
        "TASKQ_PG_DSN is not set: name your database with "
        "TASKQ_PG_DSN=postgresql://USER:PASSWORD@HOST:5432/DATABASE in the environment "
        f"or in .env{also}"
    )


def require_pg_dsn(dsn: str, *, flag: str | None = None) -> str:
    """``dsn`` when set, else :func:`missing_pg_dsn`'s error, raised before any connection."""
    if not dsn.strip():
        raise missing_pg_dsn(flag=flag)
    return dsn


def check_pg_dsn(value: str) -> str:
    """``value`` stripped if it is a usable ``postgresql://`` DSN, else ``ValueError`` saying why.

    The message never repeats the DSN (it may hold a password).
    """
    return _pg_dsn(value)


_SURROGATE = re.compile("[\ud800-\udfff]")


def decodable(value: Any) -> Any:
    """``value``, refused when it holds undecodable bytes: they arrive as lone surrogates
    (surrogateescape), named here rather than failing later with a traceback."""
    texts = value if isinstance(value, list) else [value]
    if any(isinstance(t, str) and _SURROGATE.search(t) for t in texts):
        raise ValueError("holds bytes that are not UTF-8 text")
    return value


def _redis_url(value: str | None) -> str | None:
    if value is None:
        return None
    text = value.strip()
    scheme, sep, rest = text.partition("://")
    if not sep or scheme.lower() not in {"redis", "rediss", "unix"}:
        raise ValueError("must be a redis://, rediss:// or unix:// URL")
    if any(ch.isspace() for ch in rest):
        raise ValueError("must not contain spaces")
    return text


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([wdhms])", re.IGNORECASE)
_DURATION_FULL = re.compile(r"(?:\d+(?:\.\d+)?\s*[wdhms]\s*)+", re.IGNORECASE)
_UNIT_SECONDS: Final = {"w": 604800.0, "d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
_NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?")
_TIMEDELTA: Final = TypeAdapter(timedelta)
_DURATION_HELP: Final = (
    "use ISO-8601 (PT24H, P30D), a number with a unit (30d, 24h, 90m, 45s, 1h30m) or plain seconds"
)


def _seconds(value: float) -> timedelta:
    if not math.isfinite(value):
        raise ValueError(f"{value!r} is not a finite duration: {_DURATION_HELP}")
    try:
        return timedelta(seconds=value)
    except OverflowError:
        # An OverflowError would escape pydantic's error collection unnamed.
        raise ValueError(f"{value!r} seconds is too long a duration") from None


def parse_duration(value: object) -> timedelta:
    """Read a duration: ISO-8601 (``PT24H``), ``30d``/``24h``/``90m``/``45s``, or seconds.

    Units combine (``1h30m``); ``w`` is weeks. A ``timedelta`` passes through,
    and pydantic's ``[D day[s], ]HH:MM:SS`` form is accepted too. Raises
    :class:`ValueError` with the accepted forms otherwise.
    """
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration: {_DURATION_HELP}")
    if isinstance(value, int | float):
        return _seconds(float(value))
    if isinstance(value, str):
        text = value.strip()
        if _NUMBER.fullmatch(text):
            return _seconds(float(text))
        if _DURATION_FULL.fullmatch(text):
            total = sum(
                float(n) * _UNIT_SECONDS[unit.lower()] for n, unit in _DURATION_PART.findall(text)
            )
            return _seconds(total)
        try:
            return _TIMEDELTA.validate_python(text)
        except ValidationError:
            pass
    raise ValueError(f"{value!r} is not a duration: {_DURATION_HELP}")


def _positive_duration(value: timedelta) -> timedelta:
    if value <= timedelta(0):
        raise ValueError(f"must be a positive duration, got {value}")
    why = too_long(value.total_seconds())
    if why is not None:
        raise ValueError(f"{value} {why}")
    return value


#: Postgres's own limit for ``lock_timeout`` (an int of milliseconds, about 24.8 days).
_PG_MAX_TIMEOUT_MS: Final = 2_147_483_647


def _within_lock_timeout(value: float) -> float:
    # Each budget becomes a lock_timeout: a larger one fails every enqueue it applies to.
    if value > _PG_MAX_TIMEOUT_MS:
        raise ValueError(
            f"{value!r} ms must be at most {_PG_MAX_TIMEOUT_MS} ms (about 24.8 days): "
            "Postgres refuses a longer lock_timeout"
        )
    return value


def _not_too_long_seconds(value: float) -> float:
    why = too_long(value)
    if why is not None:
        raise ValueError(f"{value!r} {why}")
    return value


def _queue_list(value: object) -> object:
    # The env form is comma-separated (NoDecode keeps pydantic-settings from
    # trying JSON first). An empty value is allowed on purpose: the worker
    # starts and logs ``worker-consumes-no-queues`` instead of refusing.
    if isinstance(value, str) and value.strip().startswith("["):
        # Tolerate the JSON form pydantic-settings users are used to, rather
        # than splitting it on commas into names like '["a"'.
        try:
            value = json.loads(value)
        except ValueError:
            raise ValueError("looks like JSON but does not parse; use a,b,c") from None
    if isinstance(value, str):
        items: list[object] = [part.strip() for part in value.split(",")]
        items = [item for item in items if item]
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        return value
    names: list[str] = []
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise ValueError("queue names must be non-empty strings")
        if len(item.strip()) > MAX_NAME_LENGTH:
            raise ValueError(
                f"a queue name is at most {MAX_NAME_LENGTH} characters, got one of "
                f"{len(item.strip()):,}"
            )
        names.append(item.strip())
    return list(dict.fromkeys(names))  # duplicates add nothing to ANY($queues)


def _hhmm(value: str) -> str:
    hour, minute = parse_hhmm_utc(value, what="daily fire time")
    return f"{hour:02d}:{minute:02d}"


def _absolute_path(value: str) -> str:
    if not os.path.isabs(value):
        raise ValueError(f"must be an absolute path, got {value!r}")
    return value


def _ping_fits_the_probe(value: float) -> float:
    if value >= MAX_HEALTH_PG_PING_TIMEOUT:
        raise ValueError(
            f"must be below {MAX_HEALTH_PG_PING_TIMEOUT:g} s, got {value:g}: `taskq health` "
            "gives the whole exchange 2 s, so a longer wait reads as no worker answering"
        )
    return value


def _socket_mode(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        mode = value  # already a mode (load_from_dict, with_overrides)
    else:
        text = str(value).strip().lower().removeprefix("0o")
        if not re.fullmatch(r"[0-7]{3,4}", text):
            raise ValueError(f"must be an octal file mode such as 0600 or 0660, got {value!r}")
        mode = int(text, 8)
    if mode not in (0o600, 0o660):
        # Connecting needs write permission: read-only bits would grant nothing, and a
        # socket anyone can connect to would let any local user stop probes or read tasks.
        raise ValueError(f"must be 0600 (the worker's user) or 0660 (its group too), got {value!r}")
    return mode


_CRON_FIELD = re.compile(r"[0-9A-Za-z*/,?#-]+")


def _cron_shape(value: str | None) -> str | None:
    if value is None:
        return None
    parts = value.split()
    if len(parts) != 5 or not all(_CRON_FIELD.fullmatch(p) for p in parts):
        raise ValueError(
            f"{value!r} is not a 5-field cron expression (minute hour day-of-month month "
            "day-of-week, separated by spaces)"
        )
    # Parsed in full now: a bad field would otherwise crash the worker once it leads.
    sweep_cron(value)
    return " ".join(parts)


def _log_level(value: str) -> str:
    name = value.strip().upper()
    if name not in logging.getLevelNamesMapping():
        raise ValueError(
            f"{value!r} is not a log level: use DEBUG, INFO, WARNING, ERROR or CRITICAL"
        )
    return name


def _lower(value: object) -> object:
    return value.strip().lower() if isinstance(value, str) else value


def _schema_identifier(value: str) -> str:
    try:
        return validate_identifier(value, what="schema name")
    except InvalidIdentifierError as exc:
        # A ValueError joins pydantic's error list, so every bad value is
        # reported in one message instead of stopping at the schema name.
        raise ValueError(str(exc)) from None


_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_DRIVER_SPEC = re.compile(rf"{_DOTTED}:{_DOTTED}")
BUILTIN_DRIVERS: Final = frozenset({"asyncpg", "psycopg"})


def _driver(value: str) -> str:
    text = value.strip()
    if text.lower() in BUILTIN_DRIVERS:
        return text.lower()
    if _DRIVER_SPEC.fullmatch(text):
        return text
    raise ValueError(
        f"{value!r} is not a driver: use 'asyncpg', 'psycopg' or 'package.module:factory' "
        "for your own adapter"
    )


def _uuid_text(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return str(uuid.UUID(value.strip()))
    except ValueError:
        raise ValueError(f"{value!r} is not a UUID") from None


def redact_url(url: str) -> str:
    """``url`` with any password (userinfo or ``password=`` parameter) replaced by ``***``."""
    url = re.sub(r"(://[^:/@?#]*:)[^@/?#]*@", r"\1***@", url)
    return re.sub(r"(?i)(\bpassword=)[^&\s]*", r"\1***", url)


# -- field types ------------------------------------------------------------------------

PositiveSeconds = Annotated[
    float, Field(gt=0, allow_inf_nan=False), AfterValidator(_not_too_long_seconds)
]
NonNegativeSeconds = Annotated[
    float, Field(ge=0, allow_inf_nan=False), AfterValidator(_not_too_long_seconds)
]
OptionalPositiveSeconds = Annotated[PositiveSeconds | None, BeforeValidator(_empty_to_none)]
OptionalStr = Annotated[str | None, BeforeValidator(_empty_to_none)]
PgDsn = Annotated[str, BeforeValidator(_none_to_empty), AfterValidator(_pg_dsn_or_unset)]
#: A split DSN (direct, pooled): checked by the model, which falls back to ``pg_dsn``.
SplitDsn = Annotated[str, BeforeValidator(_none_to_empty)]
RedisUrl = Annotated[str | None, BeforeValidator(_empty_to_none), AfterValidator(_redis_url)]
SchemaName = Annotated[str, AfterValidator(_schema_identifier)]
DriverName = Annotated[str, AfterValidator(_driver)]
UuidText = Annotated[str | None, BeforeValidator(_empty_to_none), AfterValidator(_uuid_text)]
LogFormat = Annotated[Literal["json", "console"], BeforeValidator(_lower)]
LogLevel = Annotated[str, AfterValidator(_log_level)]
Duration = Annotated[timedelta, BeforeValidator(parse_duration), AfterValidator(_positive_duration)]
DailyTime = Annotated[str, AfterValidator(_hhmm)]
CronExpr = Annotated[str | None, BeforeValidator(_empty_to_none), AfterValidator(_cron_shape)]
QueueList = Annotated[list[str], NoDecode, BeforeValidator(_queue_list)]
LockBudgetMs = Annotated[float, Field(allow_inf_nan=False), AfterValidator(_within_lock_timeout)]
AbsolutePath = Annotated[str, Field(min_length=1), AfterValidator(_absolute_path)]
HealthPingSeconds = Annotated[PositiveSeconds, AfterValidator(_ping_fits_the_probe)]
SocketMode = Annotated[int, BeforeValidator(_socket_mode)]


# -- error translation ------------------------------------------------------------------


def _problem_line(error: Mapping[str, Any]) -> str:
    loc = error.get("loc", ())
    field = str(loc[0]) if loc else ""
    message = str(error.get("msg", "invalid value"))
    message = message.removeprefix("Value error, ")
    where = env_var(field) if field else "settings"
    if field in SECRET_FIELDS or "input" not in error:
        return f"{where}: {message}"
    shown = repr(error["input"])
    if shown in message:  # our own messages often quote the value already
        return f"{where}: {message}"
    return f"{where}: {message}, got {shown}"


def configuration_error(exc: ValidationError) -> ConfigurationError:
    """One error naming every bad variable, never echoing a secret."""
    lines = list(dict.fromkeys(_problem_line(e) for e in exc.errors()))
    return ConfigurationError("invalid settings: " + "; ".join(lines))


__all__ = [
    "BUILTIN_DRIVERS",
    "ENV_PREFIX",
    "MAX_HEALTH_PG_PING_TIMEOUT",
    "SECRET_FIELDS",
    "AbsolutePath",
    "CronExpr",
    "DailyTime",
    "DriverName",
    "Duration",
    "HealthPingSeconds",
    "LockBudgetMs",
    "LogFormat",
    "LogLevel",
    "NonNegativeSeconds",
    "OptionalPositiveSeconds",
    "OptionalStr",
    "PgDsn",
    "PositiveSeconds",
    "QueueList",
    "RedisUrl",
    "SchemaName",
    "SocketMode",
    "SplitDsn",
    "UuidText",
    "check_pg_dsn",
    "configuration_error",
    "decodable",
    "env_var",
    "missing_pg_dsn",
    "parse_duration",
    "redact_url",
    "require_pg_dsn",
]
