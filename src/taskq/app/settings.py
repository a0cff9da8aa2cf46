"""TaskQ's settings model: ``TASKQ_*`` environment variables (and ``.env``).

Two models, one validation story:

- :class:`TaskQSettings` holds what every TaskQ process needs (a web app that
  only enqueues, the CLI, the admin UI): the DSN, schema, Redis URL, driver
  choice, statement-cache tuning and the enqueue lock budgets.
- :class:`WorkerSettings` extends it with every variable of the worker guide's
  reference table, plus the watchdog, health ``/tasks`` and dispatch knobs.

Every way of building one validates: :meth:`TaskQSettings.load` (environment
plus ``.env``), :meth:`TaskQSettings.load_from_dict` (code; the mapping plus
defaults, the environment is not read) and direct construction. A bad single
value raises :class:`~taskq.domain.errors.ConfigurationError` naming its
``TASKQ_*`` variable; broken cross-field timing rules raise
:class:`~taskq.domain.errors.SettingsInvariantError` listing every violation at
once (the rules themselves live in :mod:`taskq.domain.settings_rules`).

The reference for operators is ``docs/settings.md``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import uuid
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Final, Literal, Self
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from taskq.app.scheduling.sweep_cron import sweep_cron
from taskq.domain.errors import ConfigurationError, InvalidIdentifierError
from taskq.domain.lock_budget import DEFAULT_CLIENT_CALL_TIMEOUT
from taskq.domain.settings_rules import (
    TimingSettings,
    check_timing,
    parse_hhmm_utc,
    too_long,
    validate_identifier,
)
from taskq.domain.storable import MAX_NAME_LENGTH
from taskq.domain.watchdog import WatchdogSettings

ENV_PREFIX: Final = "TASKQ_"
#: Upper bound of TASKQ_MAX_CONCURRENCY / --max-concurrency: one consumer task each
#: (100,000 took 1 GB and a million a minute to start), and 1.5x as many pool connections.
MAX_CONCURRENCY_LIMIT: Final = 10_000
#: TASKQ_HEALTH_PG_PING_TIMEOUT must stay below this: the probe's 2 s, less room to answer.
MAX_HEALTH_PG_PING_TIMEOUT: Final = 1.5

# Set while load_from_dict builds a model: the settings sources are then the
# mapping alone, so code-built settings never depend on the host's environment.
_MAPPING_ONLY: ContextVar[bool] = ContextVar("taskq_settings_mapping_only", default=False)

#: Fields whose values may carry a password: never echoed in errors or reprs.
_SECRET_FIELDS: Final = frozenset({"pg_dsn", "pg_dsn_direct", "pg_dsn_pooled", "redis_url"})


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


_SURROGATE = re.compile("[\ud800-\udfff]")
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
OptionalStr = Annotated[str | None, BeforeValidator(_empty_to_none)]
PgDsn = Annotated[str, BeforeValidator(_none_to_empty), AfterValidator(_pg_dsn_or_unset)]
Duration = Annotated[timedelta, BeforeValidator(parse_duration), AfterValidator(_positive_duration)]
DailyTime = Annotated[str, AfterValidator(_hhmm)]
CronExpr = Annotated[str | None, BeforeValidator(_empty_to_none), AfterValidator(_cron_shape)]
QueueList = Annotated[list[str], NoDecode, BeforeValidator(_queue_list)]
LockBudgetMs = Annotated[float, Field(allow_inf_nan=False), AfterValidator(_within_lock_timeout)]


class TaskQSettings(BaseSettings):
    """Settings every TaskQ process reads (the † variables of the reference).

    Build it with :meth:`load` or :meth:`load_from_dict`; direct construction
    validates the same way. Instances are immutable: use :meth:`with_overrides`
    for a validated copy.
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        # One .env is usually shared by the client and the worker, so a
        # worker-only variable must not make the client's model refuse it.
        extra="ignore",
        frozen=True,
        env_file_encoding="utf-8",
        validate_default=True,
    )

    pg_dsn: PgDsn = ""  # unset: see require_pg_dsn
    schema_name: Annotated[str, AfterValidator(_schema_identifier)] = "taskq"
    redis_url: Annotated[
        str | None, BeforeValidator(_empty_to_none), AfterValidator(_redis_url)
    ] = None
    environment: OptionalStr = None
    admin_host: str = "0.0.0.0"  # the documented default: bind all interfaces
    admin_port: Annotated[int, Field(ge=1, le=65535)] = 8080
    admin_url: str = "http://localhost:8080"

    driver: Annotated[str, AfterValidator(_driver)] = "asyncpg"
    client_pool_size: Annotated[int, Field(ge=1)] = 10
    statement_cache_size: Annotated[int, Field(ge=0)] = 512
    max_cached_statement_lifetime: Annotated[int, Field(ge=0)] = 3600
    pg_is_pooled: bool = False
    # OpenTelemetry spans (a client's PRODUCER spans, a worker's CONSUMER spans) and metrics.
    otel_enabled: bool = True

    # How long one client call (enqueue, get, cancel, a handle's poll) may take in
    # all: the wait for a pool connection, for a row lock (half of it) and for the
    # server's answer. See taskq.adapters.postgres.call_budget.
    client_call_timeout: PositiveSeconds = DEFAULT_CLIENT_CALL_TIMEOUT

    # Enqueue lock budgets (milliseconds, Postgres lock_timeout convention:
    # 0 or less waits without bound, or under a client's call bound, half of it).
    max_pending_lock_timeout_ms: LockBudgetMs = 200.0
    unique_lock_timeout_ms: LockBudgetMs = 200.0
    idempotency_lock_timeout_ms: LockBudgetMs = 200.0

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise _configuration_error(exc) from exc
        except UnicodeDecodeError as exc:  # from reading the env file
            raise ConfigurationError(
                f"invalid settings: {values.get('_env_file')}: not UTF-8 text "
                f"({exc.reason} at byte {exc.start})"
            ) from None

    @field_validator("*")
    @classmethod
    def _decodable(cls, value: Any) -> Any:
        # Undecodable bytes in a variable arrive as lone surrogates (surrogateescape);
        # refused here, named, rather than failing later with a traceback.
        texts = value if isinstance(value, list) else [value]
        if any(isinstance(t, str) and _SURROGATE.search(t) for t in texts):
            raise ValueError("holds bytes that are not UTF-8 text")
        return value

    # -- construction -------------------------------------------------------------------

    @classmethod
    def load(cls, env_file: str | Path | None = ".env") -> Self:
        """Read ``TASKQ_*`` from the environment and ``env_file`` (if it exists).

        Environment variables win over the file; ``env_file=None`` skips it.
        A relative path is resolved against the working directory. The default
        ``.env`` is optional; any other file named here must exist
        (``ConfigurationError`` otherwise: a typo must not mean the defaults).
        """
        if env_file is not None and str(env_file) != ".env" and not Path(env_file).is_file():
            raise ConfigurationError(f"invalid settings: env file {str(env_file)!r} does not exist")
        return cls(_env_file=env_file)

    @classmethod
    def load_from_dict(cls, mapping: Mapping[str, Any]) -> Self:
        """Build from ``mapping`` and the defaults only (the environment is not read).

        Keys are field names (``lock_lease``) or variable names
        (``TASKQ_LOCK_LEASE``), case-insensitive; values are typed or strings
        as in the environment. An unknown or repeated key is a
        :class:`ConfigurationError`, because in code it is always a typo.
        """
        data: dict[str, Any] = {}
        unknown: list[str] = []
        fields = cls.model_fields
        for key, value in mapping.items():
            name = key.lower()
            if name not in fields and key.upper().startswith(ENV_PREFIX):
                name = key[len(ENV_PREFIX) :].lower()
            if name not in fields:
                unknown.append(key)
            elif name in data:
                raise ConfigurationError(f"{env_var(name)} is given twice (as {key!r} too)")
            else:
                data[name] = value
        if unknown:
            raise ConfigurationError(
                f"unknown settings for {cls.__name__}: {', '.join(sorted(unknown))}"
            )
        token = _MAPPING_ONLY.set(True)
        try:
            return cls(**data)
        finally:
            _MAPPING_ONLY.reset(token)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        if _MAPPING_ONLY.get():
            return (init_settings,)
        return (init_settings, env_settings, dotenv_settings, file_secret_settings)

    def with_overrides(self, **changes: Any) -> Self:
        """A validated copy with ``changes`` applied (e.g. CLI flags over the environment).

        Unlike ``model_copy(update=...)`` this re-runs every check. Split DSNs
        that fell back to ``pg_dsn`` keep following it.
        """
        return self.load_from_dict({**self.model_dump(exclude_unset=True), **changes})

    @model_validator(mode="after")
    def _after_load(self) -> Self:
        return self.post_load()

    def post_load(self) -> Self:
        """Cross-field checks; runs automatically at the end of every validation.

        The base model has none. It is public so a subclass can extend it and
        so callers can re-check an instance (it is idempotent).
        """
        return self

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        for name, value in super().__repr_args__():
            if name in _SECRET_FIELDS and isinstance(value, str):
                yield name, redact_url(value)
            else:
                yield name, value


#: Validated and documented, but no code acts on them yet (see docs/settings.md).
#: ``pg_dsn_pooled`` is checked apart: its default follows ``pg_dsn``.
INERT_SETTINGS: Final = (
    "dispatch_oversample",
    "dispatch_scope_by_home_queue",
    "admin_host",
    "admin_port",
    "admin_url",
)


class MigrateSettings(TaskQSettings):
    """What ``taskq migrate`` reads: the client settings plus ``TASKQ_PG_DSN_DIRECT``.

    Migrations hold a session advisory lock, so they use the direct DSN (which,
    unset or empty, falls back to ``pg_dsn``), as the worker does.
    """

    pg_dsn_direct: Annotated[str, BeforeValidator(_none_to_empty)] = ""

    @field_validator("pg_dsn_direct")
    @classmethod
    def _split_dsn(cls, value: str, info: ValidationInfo) -> str:
        return _direct_dsn(value, info)


def _direct_dsn(value: str, info: ValidationInfo) -> str:
    if value.strip():
        return _pg_dsn(value)
    # Fall back to pg_dsn. If pg_dsn itself was invalid it is absent here
    # and already reported once; "" keeps the same error from tripling.
    fallback = info.data.get("pg_dsn", "")
    return fallback if isinstance(fallback, str) else ""


class WorkerSettings(TaskQSettings):
    """Every worker variable of the settings reference, validated together.

    ``pg_dsn_direct`` and ``pg_dsn_pooled`` are never empty after loading: an
    unset (or empty) split DSN falls back to ``pg_dsn``. ``post_load`` checks
    the timing rules and raises one
    :class:`~taskq.domain.errors.SettingsInvariantError` naming every
    variable involved.
    """

    # -- connections --------------------------------------------------------------------
    pg_dsn_direct: Annotated[str, BeforeValidator(_none_to_empty)] = ""
    pg_dsn_pooled: Annotated[str, BeforeValidator(_none_to_empty)] = ""
    dispatcher_pool_size: Annotated[int, Field(ge=1)] = 4
    heartbeat_pool_size: Annotated[int, Field(ge=1)] = 4
    pool_max_inactive_lifetime: NonNegativeSeconds = 300.0

    # -- worker ---------------------------------------------------------------------------
    max_concurrency: Annotated[int, Field(ge=1, le=MAX_CONCURRENCY_LIMIT)] = 8
    queues: QueueList = Field(default_factory=lambda: ["default"])
    poll_interval: PositiveSeconds = 1.0
    worker_label: OptionalStr = None
    workgroup_instance: Annotated[
        str | None, BeforeValidator(_empty_to_none), AfterValidator(_uuid_text)
    ] = None
    worker_group: str = "default"
    log_format: Annotated[Literal["json", "console"], BeforeValidator(_lower)] = "json"
    log_level: Annotated[str, AfterValidator(_log_level)] = "INFO"
    force_update_actor_config: bool = False
    max_retry_backoff: Duration = timedelta(hours=24)
    rate_limit_pg_fallback_enabled: bool = True
    dispatch_oversample: Annotated[int, Field(ge=1)] = 2
    dispatch_scope_by_home_queue: bool = False

    # -- heartbeat and leases (checked together by the domain's timing rules) ------------
    heartbeat_interval: float = 10.0
    lock_lease: float = 60.0
    max_heartbeat_failures: int = 3
    heartbeat_command_timeout: PositiveSeconds = 5.0

    # -- shutdown -------------------------------------------------------------------------
    # 75, not the 60 quoted under "Timing constraints": the reference table
    # sizes it for the default shutdown worst case (67s).
    termination_grace_period: float = 75.0
    cancellation_grace_period: float = 30.0
    cleanup_grace_period: float = 10.0

    # -- watchdog -------------------------------------------------------------------------
    watchdog_enabled: bool = True
    watchdog_check_interval: PositiveSeconds = 5.0
    watchdog_tick_grace_factor: Annotated[float, Field(ge=1, allow_inf_nan=False)] = 3.0
    watchdog_stale_floor: PositiveSeconds = 30.0
    watchdog_dump_interval: PositiveSeconds = 10.0
    watchdog_loop_lag_budget: PositiveSeconds = 10.0
    watchdog_loop_lag_startup_grace: PositiveSeconds = 30.0

    # -- health ---------------------------------------------------------------------------
    health_enabled: bool = True
    # Absolute: a relative path binds under the worker's working directory, and every
    # probe would then depend on running from that same directory.
    health_socket_path: Annotated[str, Field(min_length=1), AfterValidator(_absolute_path)] = (
        "/tmp/taskq_health.sock"
    )
    # Below 1.5 s: `taskq health` gives the whole exchange 2 s, and a /ready that waited
    # longer on a silent database would read as "no worker answers" (exit 2), not a 503.
    health_pg_ping_timeout: Annotated[PositiveSeconds, AfterValidator(_ping_fits_the_probe)] = 0.2
    health_tasks_enabled: bool = False
    # Octal, as chmod reads it: 0600 (the worker's user) or 0660 (its group too, for a
    # sidecar); nothing else.
    health_socket_mode: Annotated[int, BeforeValidator(_socket_mode)] = 0o600

    # -- notify ---------------------------------------------------------------------------
    notify_enabled: bool = True
    notify_poll_interval: PositiveSeconds = 5.0
    notify_health_check_interval: PositiveSeconds = 5.0
    notify_reconnect_backoff_initial: PositiveSeconds = 1.0

    # -- prune and archive ----------------------------------------------------------------
    prune_schedule_utc: DailyTime = "03:00"
    prune_cron_expr: CronExpr = None
    prune_batch_size: Annotated[int, Field(ge=1)] = 10000
    prune_retention_period: Duration = timedelta(days=30)
    prune_retention_succeeded: Duration = timedelta(days=30)
    prune_retention_failed: Duration = timedelta(days=90)
    prune_retention_cancelled: Duration = timedelta(days=30)
    prune_retention_abandoned: Duration = timedelta(days=90)
    archive_retention_period: Duration = timedelta(days=365)
    archive_expiry_schedule_utc: DailyTime = "04:00"
    archive_expiry_cron_expr: CronExpr = None

    # -- until-idle -----------------------------------------------------------------------
    idle_settle_window: NonNegativeSeconds = 2.0
    idle_poll_interval: PositiveSeconds = 1.0
    idle_max_runtime: Annotated[PositiveSeconds | None, BeforeValidator(_empty_to_none)] = None

    @field_validator("pg_dsn_direct", "pg_dsn_pooled")
    @classmethod
    def _split_dsn(cls, value: str, info: ValidationInfo) -> str:
        return _direct_dsn(value, info)

    def inert_settings(self) -> list[str]:
        """The accepted-but-not-yet-acted-on variables set to something other than their default.

        The worker logs them once at start (``worker-settings-inert``), so nobody
        silently gets nothing; ``docs/settings.md`` says what each is planned for.
        """
        # A switch turned off asks for nothing, so it is not named (the integration
        # tests' workers turn health off, as operators without probes do).
        named = [
            env_var(name)
            for name in INERT_SETTINGS
            if getattr(self, name) is not False
            and getattr(self, name) != WorkerSettings.model_fields[name].get_default()
        ]
        if self.pg_dsn_pooled != self.pg_dsn:
            named.append(env_var("pg_dsn_pooled"))
        return named

    def post_load(self) -> Self:
        """Check the timing rules (all violations in one error); return ``self``."""
        check_timing(self.timing)
        return self

    # -- derived values -------------------------------------------------------------------

    @property
    def worker_pool_size(self) -> int:
        """Size of ``worker_pool``: headroom for terminal writes while slots recycle."""
        return int(self.max_concurrency * 1.5)

    @property
    def timing(self) -> TimingSettings:
        """The values the domain's timing rules look at."""
        return TimingSettings(
            heartbeat_interval=self.heartbeat_interval,
            lock_lease=self.lock_lease,
            cancellation_grace_period=self.cancellation_grace_period,
            cleanup_grace_period=self.cleanup_grace_period,
            termination_grace_period=self.termination_grace_period,
            max_heartbeat_failures=self.max_heartbeat_failures,
            heartbeat_command_timeout=self.heartbeat_command_timeout,
            watchdog_enabled=self.watchdog_enabled,
            watchdog_tick_grace_factor=self.watchdog_tick_grace_factor,
            watchdog_stale_floor=self.watchdog_stale_floor,
        )

    @property
    def watchdog(self) -> WatchdogSettings:
        """The watchdog tuning as the domain's detectors take it."""
        return WatchdogSettings(
            enabled=self.watchdog_enabled,
            check_interval=self.watchdog_check_interval,
            tick_grace_factor=self.watchdog_tick_grace_factor,
            stale_floor=self.watchdog_stale_floor,
            dump_interval=self.watchdog_dump_interval,
            loop_lag_budget=self.watchdog_loop_lag_budget,
            loop_lag_startup_grace=self.watchdog_loop_lag_startup_grace,
        )

    @property
    def effective_poll_interval(self) -> float:
        """The producer's fallback poll cadence: NOTIFY on → notify_poll_interval."""
        return self.notify_poll_interval if self.notify_enabled else self.poll_interval

    def prune_retention_for(self, status: str) -> timedelta:
        """How long a terminal job in ``status`` stays in ``jobs`` before archival.

        ``crashed`` shares the ``abandoned`` retention; any other status uses
        the global ``prune_retention_period``.
        """
        per_status = {
            "succeeded": self.prune_retention_succeeded,
            "failed": self.prune_retention_failed,
            "cancelled": self.prune_retention_cancelled,
            "abandoned": self.prune_retention_abandoned,
            "crashed": self.prune_retention_abandoned,
        }
        return per_status.get(status, self.prune_retention_period)


# -- unknown variable names -------------------------------------------------------------

#: TASKQ_* names TaskQ's own tooling reads that are not settings.
_TOOLING_VARS: Final = frozenset({"TASKQ_TEST_DSN", "TASKQ_TEST_REDIS_URL", "TASKQ_VENV"})


def unknown_variables(
    environ: Mapping[str, str], env_file: str | Path | None = ".env"
) -> dict[str, str | None]:
    """``TASKQ_*`` names in ``environ`` or ``env_file`` that no setting reads, each with
    the closest known name (``None`` when nothing is close). ``load`` ignores them, so a
    typo such as ``TASKQ_MAX_CONCURENCY`` would otherwise go unnoticed.
    """
    import difflib

    names = set(environ)
    if env_file is not None and Path(env_file).is_file():
        from dotenv import dotenv_values

        with contextlib.suppress(UnicodeDecodeError):  # load() reports the file
            names |= set(dotenv_values(env_file, encoding="utf-8"))
    known = {env_var(name) for name in WorkerSettings.model_fields}
    unknown = sorted(
        n
        for n in names
        if n.upper().startswith(ENV_PREFIX) and n.upper() not in known | _TOOLING_VARS
    )
    return {
        name: next(iter(difflib.get_close_matches(name.upper(), known, n=1, cutoff=0.8)), None)
        for name in unknown
    }


# -- error translation ------------------------------------------------------------------


def _problem_line(error: Mapping[str, Any]) -> str:
    loc = error.get("loc", ())
    field = str(loc[0]) if loc else ""
    message = str(error.get("msg", "invalid value"))
    message = message.removeprefix("Value error, ")
    where = env_var(field) if field else "settings"
    if field in _SECRET_FIELDS or "input" not in error:
        return f"{where}: {message}"
    shown = repr(error["input"])
    if shown in message:  # our own messages often quote the value already
        return f"{where}: {message}"
    return f"{where}: {message}, got {shown}"


def _configuration_error(exc: ValidationError) -> ConfigurationError:
    """One error naming every bad variable, never echoing a secret."""
    lines = list(dict.fromkeys(_problem_line(e) for e in exc.errors()))
    return ConfigurationError("invalid settings: " + "; ".join(lines))


__all__ = [
    "BUILTIN_DRIVERS",
    "DEFAULT_CLIENT_CALL_TIMEOUT",
    "ENV_PREFIX",
    "INERT_SETTINGS",
    "MAX_CONCURRENCY_LIMIT",
    "MigrateSettings",
    "TaskQSettings",
    "WorkerSettings",
    "check_pg_dsn",
    "env_var",
    "missing_pg_dsn",
    "parse_duration",
    "redact_url",
    "require_pg_dsn",
    "unknown_variables",
]
