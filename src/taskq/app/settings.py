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

Each value's parsing and field type is :mod:`taskq.app.setting_values`'s; the
public helpers among them (``parse_duration``, ``redact_url``, the DSN checks)
are importable from here too. The reference for operators is ``docs/settings.md``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Final, Self

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from taskq.app.setting_values import (
    BUILTIN_DRIVERS,
    ENV_PREFIX,
    SECRET_FIELDS,
    AbsolutePath,
    CronExpr,
    DailyTime,
    DriverName,
    Duration,
    HealthPingSeconds,
    LockBudgetMs,
    LogFormat,
    LogLevel,
    NonNegativeSeconds,
    OptionalPositiveSeconds,
    OptionalStr,
    PgDsn,
    PositiveSeconds,
    QueueList,
    RedisUrl,
    SchemaName,
    SocketMode,
    SplitDsn,
    UuidText,
    check_pg_dsn,
    configuration_error,
    decodable,
    env_var,
    missing_pg_dsn,
    parse_duration,
    redact_url,
    require_pg_dsn,
)
from taskq.domain.errors import ConfigurationError
from taskq.domain.lock_budget import DEFAULT_CLIENT_CALL_TIMEOUT
from taskq.domain.retry import DEFAULT_MAX_RETRY_BACKOFF
from taskq.domain.settings_rules import TimingSettings, check_timing
from taskq.domain.watchdog import WatchdogSettings

#: Upper bound of TASKQ_MAX_CONCURRENCY / --max-concurrency: one consumer task each
#: (100,000 took 1 GB and a million a minute to start), and 1.5x as many pool connections.
MAX_CONCURRENCY_LIMIT: Final = 10_000

# Set while load_from_dict builds a model: the settings sources are then the
# mapping alone, so code-built settings never depend on the host's environment.
_MAPPING_ONLY: ContextVar[bool] = ContextVar("taskq_settings_mapping_only", default=False)


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
    schema_name: SchemaName = "taskq"
    redis_url: RedisUrl = None
    environment: OptionalStr = None
    admin_host: str = "0.0.0.0"  # the documented default: bind all interfaces
    admin_port: Annotated[int, Field(ge=1, le=65535)] = 8080
    admin_url: str = "http://localhost:8080"

    driver: DriverName = "asyncpg"
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
            raise configuration_error(exc) from exc
        except UnicodeDecodeError as exc:  # from reading the env file
            raise ConfigurationError(
                f"invalid settings: {values.get('_env_file')}: not UTF-8 text "
                f"({exc.reason} at byte {exc.start})"
            ) from None

    @field_validator("*")
    @classmethod
    def _decodable(cls, value: Any) -> Any:
        return decodable(value)

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
            if name in SECRET_FIELDS and isinstance(value, str):
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

    pg_dsn_direct: SplitDsn = ""

    @field_validator("pg_dsn_direct")
    @classmethod
    def _split_dsn(cls, value: str, info: ValidationInfo) -> str:
        return _direct_dsn(value, info)


def _direct_dsn(value: str, info: ValidationInfo) -> str:
    if value.strip():
        return check_pg_dsn(value)
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
    pg_dsn_direct: SplitDsn = ""
    pg_dsn_pooled: SplitDsn = ""
    dispatcher_pool_size: Annotated[int, Field(ge=1)] = 4
    heartbeat_pool_size: Annotated[int, Field(ge=1)] = 4
    pool_max_inactive_lifetime: NonNegativeSeconds = 300.0

    # -- worker ---------------------------------------------------------------------------
    max_concurrency: Annotated[int, Field(ge=1, le=MAX_CONCURRENCY_LIMIT)] = 8
    queues: QueueList = Field(default_factory=lambda: ["default"])
    poll_interval: PositiveSeconds = 1.0
    worker_label: OptionalStr = None
    workgroup_instance: UuidText = None
    worker_group: str = "default"
    log_format: LogFormat = "json"
    log_level: LogLevel = "INFO"
    force_update_actor_config: bool = False
    max_retry_backoff: Duration = DEFAULT_MAX_RETRY_BACKOFF
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
    health_socket_path: AbsolutePath = "/tmp/taskq_health.sock"
    # Below 1.5 s: `taskq health` gives the whole exchange 2 s, and a /ready that waited
    # longer on a silent database would read as "no worker answers" (exit 2), not a 503.
    health_pg_ping_timeout: HealthPingSeconds = 0.2
    health_tasks_enabled: bool = False
    # Octal, as chmod reads it: 0600 (the worker's user) or 0660 (its group too, for a
    # sidecar); nothing else.
    health_socket_mode: SocketMode = 0o600

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
    idle_max_runtime: OptionalPositiveSeconds = None

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
