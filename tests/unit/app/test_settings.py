"""The settings model: every TASKQ_* variable, fallbacks, invariants, .env and errors."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from taskq.app.settings import (
    TaskQSettings,
    WorkerSettings,
    env_var,
    parse_duration,
    redact_url,
)
from taskq.domain.errors import ConfigurationError, SettingsInvariantError
from taskq.domain.settings_rules import TimingSettings
from taskq.domain.watchdog import WatchdogSettings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No TASKQ_* variable or stray .env from the machine leaks into a test."""
    for name in list(os.environ):
        if name.upper().startswith("TASKQ_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


# ---------------------------------------------------------------- defaults

# The worker guide's reference table (plus the documented additions), field → default.
TABLE_DEFAULTS: dict[str, Any] = {
    "pg_dsn": "",  # unset: no built-in DSN
    "schema_name": "taskq",
    "redis_url": None,
    "environment": None,
    "admin_host": "0.0.0.0",
    "admin_port": 8080,
    "admin_url": "http://localhost:8080",
    "driver": "asyncpg",
    "client_pool_size": 10,
    "statement_cache_size": 512,
    "max_cached_statement_lifetime": 3600,
    "pg_is_pooled": False,
    "client_call_timeout": 10.0,
    "max_pending_lock_timeout_ms": 200.0,
    "unique_lock_timeout_ms": 200.0,
    "idempotency_lock_timeout_ms": 200.0,
    "pg_dsn_direct": "",
    "pg_dsn_pooled": "",
    "dispatcher_pool_size": 4,
    "heartbeat_pool_size": 4,
    "pool_max_inactive_lifetime": 300.0,
    "max_concurrency": 8,
    "queues": ["default"],
    "poll_interval": 1.0,
    "worker_label": None,
    "workgroup_instance": None,
    "worker_group": "default",
    "otel_enabled": True,
    "log_format": "json",
    "log_level": "INFO",
    "force_update_actor_config": False,
    "max_retry_backoff": timedelta(hours=24),
    "rate_limit_pg_fallback_enabled": True,
    "dispatch_oversample": 2,
    "dispatch_scope_by_home_queue": False,
    "heartbeat_interval": 10.0,
    "lock_lease": 60.0,
    "max_heartbeat_failures": 3,
    "heartbeat_command_timeout": 5.0,
    "termination_grace_period": 75.0,
    "cancellation_grace_period": 30.0,
    "cleanup_grace_period": 10.0,
    "watchdog_enabled": True,
    "watchdog_check_interval": 5.0,
    "watchdog_tick_grace_factor": 3.0,
    "watchdog_stale_floor": 30.0,
    "watchdog_dump_interval": 10.0,
    "watchdog_loop_lag_budget": 10.0,
    "watchdog_loop_lag_startup_grace": 30.0,
    "health_enabled": True,
    "health_socket_path": "/tmp/taskq_health.sock",
    "health_pg_ping_timeout": 0.2,
    "health_tasks_enabled": False,
    "health_socket_mode": 0o600,
    "notify_enabled": True,
    "notify_poll_interval": 5.0,
    "notify_health_check_interval": 5.0,
    "notify_reconnect_backoff_initial": 1.0,
    "prune_schedule_utc": "03:00",
    "prune_cron_expr": None,
    "prune_batch_size": 10000,
    "prune_retention_period": timedelta(days=30),
    "prune_retention_succeeded": timedelta(days=30),
    "prune_retention_failed": timedelta(days=90),
    "prune_retention_cancelled": timedelta(days=30),
    "prune_retention_abandoned": timedelta(days=90),
    "archive_retention_period": timedelta(days=365),
    "archive_expiry_schedule_utc": "04:00",
    "archive_expiry_cron_expr": None,
    "idle_settle_window": 2.0,
    "idle_poll_interval": 1.0,
    "idle_max_runtime": None,
}

UUID7 = "01890a5d-ac96-774b-bcce-b302099a8057"

# field → (value as it appears in the environment, parsed value), one non-default each.
ENV_CASES: dict[str, tuple[str, Any]] = {
    "pg_dsn": ("postgresql://app:pw@db:5433/app", "postgresql://app:pw@db:5433/app"),
    "schema_name": ("jobs_v2", "jobs_v2"),
    "redis_url": ("redis://cache:6379/1", "redis://cache:6379/1"),
    "environment": ("staging", "staging"),
    "admin_host": ("127.0.0.1", "127.0.0.1"),
    "admin_port": ("9090", 9090),
    "admin_url": ("https://jobs.example.org", "https://jobs.example.org"),
    "driver": ("psycopg", "psycopg"),
    "client_pool_size": ("20", 20),
    "statement_cache_size": ("0", 0),
    "max_cached_statement_lifetime": ("600", 600),
    "pg_is_pooled": ("true", True),
    "client_call_timeout": ("2.5", 2.5),
    "max_pending_lock_timeout_ms": ("750", 750.0),
    "unique_lock_timeout_ms": ("0", 0.0),
    "idempotency_lock_timeout_ms": ("1500.5", 1500.5),
    "pg_dsn_direct": ("postgresql://u@primary/db", "postgresql://u@primary/db"),
    "pg_dsn_pooled": ("postgresql://u@bouncer:6432/db", "postgresql://u@bouncer:6432/db"),
    "dispatcher_pool_size": ("2", 2),
    "heartbeat_pool_size": ("3", 3),
    "pool_max_inactive_lifetime": ("0", 0.0),
    "max_concurrency": ("16", 16),
    "queues": ("default,priority", ["default", "priority"]),
    "poll_interval": ("0.25", 0.25),
    "worker_label": ("api-1", "api-1"),
    "workgroup_instance": (UUID7.upper(), UUID7),
    "worker_group": ("billing", "billing"),
    "otel_enabled": ("false", False),
    "log_format": ("Console", "console"),
    "log_level": ("debug", "DEBUG"),
    "force_update_actor_config": ("1", True),
    "max_retry_backoff": ("PT6H", timedelta(hours=6)),
    "rate_limit_pg_fallback_enabled": ("no", False),
    "dispatch_oversample": ("1", 1),
    "dispatch_scope_by_home_queue": ("yes", True),
    "heartbeat_interval": ("5", 5.0),
    "lock_lease": ("120", 120.0),
    "max_heartbeat_failures": ("5", 5),
    "heartbeat_command_timeout": ("2.5", 2.5),
    "termination_grace_period": ("90", 90.0),
    "cancellation_grace_period": ("20", 20.0),
    "cleanup_grace_period": ("15", 15.0),
    "watchdog_enabled": ("off", False),
    "watchdog_check_interval": ("1", 1.0),
    "watchdog_tick_grace_factor": ("2", 2.0),
    "watchdog_stale_floor": ("16", 16.0),
    "watchdog_dump_interval": ("4", 4.0),
    "watchdog_loop_lag_budget": ("20", 20.0),
    "watchdog_loop_lag_startup_grace": ("60", 60.0),
    "health_enabled": ("false", False),
    "health_socket_path": ("/run/taskq.sock", "/run/taskq.sock"),
    "health_pg_ping_timeout": ("0.5", 0.5),
    "health_tasks_enabled": ("true", True),
    "health_socket_mode": ("0660", 0o660),
    "notify_enabled": ("false", False),
    "notify_poll_interval": ("10", 10.0),
    "notify_health_check_interval": ("2", 2.0),
    "notify_reconnect_backoff_initial": ("0.5", 0.5),
    "prune_schedule_utc": ("2:30", "02:30"),
    "prune_cron_expr": ("15 3 * * 1-5", "15 3 * * 1-5"),
    "prune_batch_size": ("500", 500),
    "prune_retention_period": ("14d", timedelta(days=14)),
    "prune_retention_succeeded": ("7d", timedelta(days=7)),
    "prune_retention_failed": ("P60D", timedelta(days=60)),
    "prune_retention_cancelled": ("48h", timedelta(hours=48)),
    "prune_retention_abandoned": ("86400", timedelta(days=1)),
    "archive_retention_period": ("730d", timedelta(days=730)),
    "archive_expiry_schedule_utc": ("05:45", "05:45"),
    "archive_expiry_cron_expr": ("0 4 1 * *", "0 4 1 * *"),
    "idle_settle_window": ("0", 0.0),
    "idle_poll_interval": ("0.1", 0.1),
    "idle_max_runtime": ("600", 600.0),
}


def test_tables_cover_every_field() -> None:
    """Every WorkerSettings field has a pinned default and an env parsing case below."""
    assert set(WorkerSettings.model_fields) == set(TABLE_DEFAULTS) == set(ENV_CASES)


def test_taskq_settings_holds_only_the_shared_fields() -> None:
    """TaskQSettings is the client subset: no worker variable leaks into it."""
    assert set(TaskQSettings.model_fields) == {
        "pg_dsn",
        "schema_name",
        "redis_url",
        "environment",
        "admin_host",
        "admin_port",
        "admin_url",
        "driver",
        "client_pool_size",
        "statement_cache_size",
        "max_cached_statement_lifetime",
        "pg_is_pooled",
        "otel_enabled",
        "client_call_timeout",
        "max_pending_lock_timeout_ms",
        "unique_lock_timeout_ms",
        "idempotency_lock_timeout_ms",
    }


@pytest.mark.parametrize(("field", "default"), sorted(TABLE_DEFAULTS.items()))
def test_default_matches_reference(field: str, default: Any) -> None:
    """With nothing set, each field holds the reference table's default."""
    assert getattr(WorkerSettings.load(), field) == default


@pytest.mark.parametrize(("field", "case"), sorted(ENV_CASES.items()))
def test_env_var_is_parsed(
    monkeypatch: pytest.MonkeyPatch, field: str, case: tuple[str, Any]
) -> None:
    """Each TASKQ_* variable reaches its field, converted to the field's type."""
    raw, expected = case
    monkeypatch.setenv(env_var(field), raw)
    settings = WorkerSettings.load()
    assert getattr(settings, field) == expected
    assert type(getattr(settings, field)) is type(expected)


def test_env_var_names_are_prefixed_upper_case() -> None:
    """env_var maps a field name to its TASKQ_ variable."""
    assert env_var("lock_lease") == "TASKQ_LOCK_LEASE"


def test_env_var_names_are_case_insensitive(monkeypatch: pytest.MonkeyPatch) -> None:
    """A lower-case variable name is read like the upper-case one."""
    monkeypatch.setenv("taskq_max_concurrency", "3")
    assert WorkerSettings.load().max_concurrency == 3


@pytest.mark.parametrize(("max_concurrency", "pool"), [(1, 1), (3, 4), (8, 12), (10, 15)])
def test_worker_pool_size_is_derived(max_concurrency: int, pool: int) -> None:
    """worker_pool_size is int(max_concurrency × 1.5)."""
    settings = WorkerSettings.load_from_dict({"max_concurrency": max_concurrency})
    assert settings.worker_pool_size == pool


# ---------------------------------------------------------------- queues


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("default", ["default"]),
        ("default,priority,email", ["default", "priority", "email"]),
        (" a , b ,, c ", ["a", "b", "c"]),
        ("a,b,a", ["a", "b"]),
        ('["a", "b"]', ["a", "b"]),
        ("", []),
        ("  ", []),
    ],
)
def test_queues_env_is_comma_separated(
    monkeypatch: pytest.MonkeyPatch, raw: str, expected: list[str]
) -> None:
    """TASKQ_QUEUES splits on commas; empty means no queues (allowed), not an error."""
    monkeypatch.setenv("TASKQ_QUEUES", raw)
    assert WorkerSettings.load().queues == expected


def test_unset_queues_default_to_default_queue() -> None:
    """Without TASKQ_QUEUES the worker consumes ["default"]."""
    assert WorkerSettings.load().queues == ["default"]


def test_queues_accept_a_list_in_code() -> None:
    """load_from_dict takes a real list for queues."""
    assert WorkerSettings.load_from_dict({"queues": ("x", "y")}).queues == ["x", "y"]


@pytest.mark.parametrize("bad", [["a", ""], ["a", 3], '["a", '])
def test_bad_queue_lists_are_refused(bad: object) -> None:
    """Empty or non-string queue names and broken JSON name TASKQ_QUEUES."""
    with pytest.raises(ConfigurationError, match="TASKQ_QUEUES"):
        WorkerSettings.load_from_dict({"queues": bad})


# ---------------------------------------------------------------- durations


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("PT24H", timedelta(hours=24)),
        ("P30D", timedelta(days=30)),
        ("P1DT12H", timedelta(days=1, hours=12)),
        ("30d", timedelta(days=30)),
        ("24h", timedelta(hours=24)),
        ("90m", timedelta(minutes=90)),
        ("45s", timedelta(seconds=45)),
        ("2w", timedelta(weeks=2)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("1.5h", timedelta(minutes=90)),
        ("30D", timedelta(days=30)),
        ("3600", timedelta(hours=1)),
        ("0.5", timedelta(milliseconds=500)),
        ("1 day, 01:00:00", timedelta(days=1, hours=1)),
        (120, timedelta(minutes=2)),
        (1.5, timedelta(seconds=1.5)),
        (timedelta(days=3), timedelta(days=3)),
    ],
)
def test_duration_forms(raw: object, expected: timedelta) -> None:
    """Durations accept ISO-8601, unit suffixes (combinable), plain seconds and timedelta."""
    assert parse_duration(raw) == expected


@pytest.mark.parametrize("raw", ["abc", "3 fortnights", "1y", "", "nan", True, None, float("inf")])
def test_unreadable_durations_raise(raw: object) -> None:
    """Anything else is a ValueError that lists the accepted forms."""
    with pytest.raises(ValueError, match="ISO-8601"):
        parse_duration(raw)


def test_overlong_duration_names_the_variable() -> None:
    """A duration past timedelta's range is a named ConfigurationError, not an OverflowError."""
    with pytest.raises(ConfigurationError, match=r"TASKQ_MAX_RETRY_BACKOFF: .*too long"):
        WorkerSettings.load_from_dict({"max_retry_backoff": "99999999999d"})


@given(
    amount=st.integers(min_value=0, max_value=10_000),
    unit=st.sampled_from([("s", 1), ("m", 60), ("h", 3600), ("d", 86400), ("w", 604800)]),
)
def test_unit_durations_scale(amount: int, unit: tuple[str, int]) -> None:
    """N<unit> is always N times the unit's length in seconds."""
    suffix, seconds = unit
    assert parse_duration(f"{amount}{suffix}") == timedelta(seconds=amount * seconds)


@pytest.mark.parametrize("raw", ["0", "-5", "PT0S", "0d"])
def test_retention_must_be_positive(raw: str) -> None:
    """A zero or negative retention is refused, naming the variable."""
    with pytest.raises(
        ConfigurationError, match="TASKQ_PRUNE_RETENTION_FAILED: must be a positive"
    ):
        WorkerSettings.load_from_dict({"TASKQ_PRUNE_RETENTION_FAILED": raw})


# ---------------------------------------------------------------- DSN fallback


def test_split_dsns_fall_back_to_pg_dsn(monkeypatch: pytest.MonkeyPatch) -> None:
    """With neither split DSN set, both are TASKQ_PG_DSN."""
    monkeypatch.setenv("TASKQ_PG_DSN", "postgresql://u:p@db/app")
    settings = WorkerSettings.load()
    assert settings.pg_dsn_direct == settings.pg_dsn_pooled == "postgresql://u:p@db/app"


def test_one_split_dsn_set_other_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """Setting only the pooled DSN leaves the direct one on TASKQ_PG_DSN."""
    monkeypatch.setenv("TASKQ_PG_DSN", "postgresql://u@primary/app")
    monkeypatch.setenv("TASKQ_PG_DSN_POOLED", "postgresql://u@bouncer:6432/app")
    settings = WorkerSettings.load()
    assert settings.pg_dsn_direct == "postgresql://u@primary/app"
    assert settings.pg_dsn_pooled == "postgresql://u@bouncer:6432/app"


@pytest.mark.parametrize("unset", ["", None])
def test_empty_split_dsn_counts_as_unset(unset: str | None) -> None:
    """An empty or None split DSN falls back instead of failing."""
    settings = WorkerSettings.load_from_dict(
        {"pg_dsn": "postgresql://u@h/db", "pg_dsn_direct": unset}
    )
    assert settings.pg_dsn_direct == "postgresql://u@h/db"


def test_fallback_also_applies_to_direct_construction() -> None:
    """The constructor applies the same fallback as load()."""
    assert WorkerSettings(pg_dsn="postgresql://u@h/db").pg_dsn_pooled == "postgresql://u@h/db"


def test_override_keeps_fallback_dsns_following_pg_dsn() -> None:
    """with_overrides(pg_dsn=...) moves split DSNs that were never set, not explicit ones."""
    base = WorkerSettings.load_from_dict({"pg_dsn_pooled": "postgresql://u@bouncer/db"})
    moved = base.with_overrides(pg_dsn="postgresql://u@other/db")
    assert moved.pg_dsn_direct == "postgresql://u@other/db"
    assert moved.pg_dsn_pooled == "postgresql://u@bouncer/db"


def test_unix_socket_dsn_is_accepted() -> None:
    """The libpq unix-socket URL form (no host part) is a valid DSN."""
    dsn = "postgresql:///taskq?host=/run/postgresql"
    assert WorkerSettings.load_from_dict({"pg_dsn": dsn}).pg_dsn_direct == dsn


@pytest.mark.parametrize(
    "bad", ["mysql://u@h/db", "localhost:5432", "postgresql://", "postgresql://h/d b"]
)
def test_bad_dsn_is_named_once(bad: str) -> None:
    """An invalid TASKQ_PG_DSN is reported once, not again through the fallbacks."""
    with pytest.raises(ConfigurationError) as info:
        WorkerSettings.load_from_dict({"pg_dsn": bad})
    message = str(info.value)
    assert "TASKQ_PG_DSN:" in message
    assert "TASKQ_PG_DSN_DIRECT" not in message
    assert "TASKQ_PG_DSN_POOLED" not in message


# ---------------------------------------------------------------- invariants


def test_lease_rule_names_both_variables() -> None:
    """lock_lease < 4 × heartbeat_interval fails with the domain's message naming both."""
    with pytest.raises(SettingsInvariantError) as info:
        WorkerSettings.load_from_dict({"heartbeat_interval": 20, "lock_lease": 60})
    assert info.value.violations == (
        "TASKQ_LOCK_LEASE (60.0) must be >= 4 × TASKQ_HEARTBEAT_INTERVAL (20.0) = 80.0",
    )


def test_termination_rule_names_all_three_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """cancellation + cleanup must be < termination − 5, checked when loading from env."""
    monkeypatch.setenv("TASKQ_TERMINATION_GRACE_PERIOD", "45")
    with pytest.raises(SettingsInvariantError) as info:
        WorkerSettings.load()
    (line,) = info.value.violations
    for name in (
        "TASKQ_CANCELLATION_GRACE_PERIOD",
        "TASKQ_CLEANUP_GRACE_PERIOD",
        "TASKQ_TERMINATION_GRACE_PERIOD",
    ):
        assert name in line


def test_lock_lease_grace_rule_names_variables() -> None:
    """cancellation + cleanup must be < lock_lease."""
    with pytest.raises(SettingsInvariantError) as info:
        WorkerSettings(
            cancellation_grace_period=45, cleanup_grace_period=15, termination_grace_period=120
        )
    (line,) = info.value.violations
    assert "TASKQ_LOCK_LEASE (60.0)" in line
    assert "TASKQ_CANCELLATION_GRACE_PERIOD (45.0)" in line


def test_all_violations_reported_in_one_error() -> None:
    """Every broken rule appears in the one SettingsInvariantError (not a ValidationError)."""
    with pytest.raises(SettingsInvariantError) as info:
        WorkerSettings.load_from_dict(
            {"lock_lease": 30, "cancellation_grace_period": 40, "termination_grace_period": 40}
        )
    assert not isinstance(info.value, ValidationError)
    assert len(info.value.violations) == 3
    assert str(info.value).startswith("invalid settings: TASKQ_LOCK_LEASE (30.0)")


@pytest.mark.parametrize("field", ["heartbeat_interval", "lock_lease", "cleanup_grace_period"])
@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_non_positive_periods_are_invariant_errors(field: str, value: str) -> None:
    """Timing periods that are not finite and > 0 go through the domain rules, named."""
    with pytest.raises(SettingsInvariantError, match=env_var(field)):
        WorkerSettings.load_from_dict({field: value})


def test_max_heartbeat_failures_below_one_is_refused() -> None:
    """max_heartbeat_failures 0 is a timing violation naming the variable."""
    with pytest.raises(SettingsInvariantError, match="TASKQ_MAX_HEARTBEAT_FAILURES"):
        WorkerSettings.load_from_dict({"max_heartbeat_failures": 0})


def test_post_load_is_idempotent() -> None:
    """post_load() re-checks a valid instance and returns it unchanged."""
    settings = WorkerSettings.load()
    assert settings.post_load() is settings


def test_taskq_settings_has_no_timing_rules() -> None:
    """The client model loads with no worker invariant in play."""
    assert TaskQSettings.load().post_load().schema_name == "taskq"


# ---------------------------------------------------------------- .env files


def test_dotenv_in_working_directory_is_read(tmp_path: Path) -> None:
    """load() reads ./.env by default."""
    (tmp_path / ".env").write_text("TASKQ_MAX_CONCURRENCY=5\nTASKQ_QUEUES=a,b\n", encoding="utf-8")
    settings = WorkerSettings.load()
    assert settings.max_concurrency == 5
    assert settings.queues == ["a", "b"]


def test_environment_wins_over_dotenv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A variable set in the environment overrides the same one in .env."""
    (tmp_path / ".env").write_text("TASKQ_MAX_CONCURRENCY=5\n", encoding="utf-8")
    monkeypatch.setenv("TASKQ_MAX_CONCURRENCY", "7")
    assert WorkerSettings.load().max_concurrency == 7


def test_explicit_env_file_path(tmp_path: Path) -> None:
    """load(env_file=path) reads that file, wherever it lives."""
    path = tmp_path / "conf" / "worker.env"
    path.parent.mkdir()
    path.write_text("TASKQ_LOG_LEVEL=warning\nTASKQ_QUEUES=\n", encoding="utf-8")
    settings = WorkerSettings.load(env_file=path)
    assert settings.log_level == "WARNING"
    assert settings.queues == []


def test_env_file_none_skips_dotenv(tmp_path: Path) -> None:
    """load(env_file=None) ignores ./.env."""
    (tmp_path / ".env").write_text("TASKQ_MAX_CONCURRENCY=5\n", encoding="utf-8")
    assert WorkerSettings.load(env_file=None).max_concurrency == 8


def test_missing_default_env_file_is_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A missing ./.env just means defaults and environment."""
    monkeypatch.chdir(tmp_path)
    assert WorkerSettings.load().max_concurrency == 8


def test_a_named_env_file_that_is_missing_is_an_error() -> None:
    """load(env_file="/typo/worker.env") silently fell back to the defaults."""
    with pytest.raises(ConfigurationError, match=r"env file '/typo/worker\.env' does not exist"):
        WorkerSettings.load(env_file="/typo/worker.env")


def test_a_non_utf8_env_file_is_named(tmp_path: Path) -> None:
    """A .env in another encoding gave a bare UnicodeDecodeError."""
    path = tmp_path / "worker.env"
    path.write_bytes(b"TASKQ_WORKER_LABEL=caf\xe9\n")
    with pytest.raises(ConfigurationError, match=r"worker\.env: not UTF-8 text"):
        WorkerSettings.load(env_file=path)


@pytest.mark.parametrize("variable", ["TASKQ_WORKER_LABEL", "TASKQ_QUEUES"])
def test_undecodable_bytes_in_a_variable_are_named(
    variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Invalid UTF-8 in the environment (a lone surrogate in Python) failed later with a
    traceback ('WorkerInfo.worker_label holds a lone surrogate')."""
    monkeypatch.setenv(variable, b"caf\xe9".decode("utf-8", "surrogateescape"))
    with pytest.raises(ConfigurationError, match=f"{variable}: holds bytes that are not UTF-8"):
        WorkerSettings.load(env_file=None)


def test_unknown_variables_are_found_with_the_closest_name(tmp_path: Path) -> None:
    """load() ignores TASKQ_* names no setting reads; the worker warns about them."""
    from taskq.app.settings import unknown_variables

    env_file = tmp_path / ".env"
    env_file.write_text("TASKQ_LOCK_LEAS=30\nOTHER=1\n", encoding="utf-8")
    found = unknown_variables(
        {"TASKQ_MAX_CONCURENCY": "4", "TASKQ_TEST_DSN": "x", "TASKQ_QUEUES": "a", "HOME": "/"},
        env_file,
    )
    assert found == {
        "TASKQ_LOCK_LEAS": "TASKQ_LOCK_LEASE",
        "TASKQ_MAX_CONCURENCY": "TASKQ_MAX_CONCURRENCY",
    }


def test_shared_dotenv_with_worker_variables_loads_client_settings(tmp_path: Path) -> None:
    """TaskQSettings ignores worker-only variables in a .env it shares with the worker."""
    (tmp_path / ".env").write_text(
        "TASKQ_SCHEMA_NAME=app_jobs\nTASKQ_MAX_CONCURRENCY=5\nOTHER_APP_VAR=x\n", encoding="utf-8"
    )
    assert TaskQSettings.load().schema_name == "app_jobs"


def test_invalid_value_in_dotenv_names_variable(tmp_path: Path) -> None:
    """A bad value from .env is a ConfigurationError naming its variable."""
    (tmp_path / ".env").write_text("TASKQ_LOG_FORMAT=xml\n", encoding="utf-8")
    with pytest.raises(ConfigurationError, match="TASKQ_LOG_FORMAT"):
        WorkerSettings.load()


# ---------------------------------------------------------------- load_from_dict


def test_load_from_dict_accepts_field_and_env_names() -> None:
    """Keys may be field names or TASKQ_ names, in any case."""
    settings = WorkerSettings.load_from_dict(
        {"max_concurrency": 2, "TASKQ_POLL_INTERVAL": "0.5", "Taskq_Worker_Label": "x"}
    )
    assert (settings.max_concurrency, settings.poll_interval, settings.worker_label) == (
        2,
        0.5,
        "x",
    )


def test_load_from_dict_ignores_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Only the mapping and the defaults count: environment and .env are not read."""
    monkeypatch.setenv("TASKQ_MAX_CONCURRENCY", "7")
    (tmp_path / ".env").write_text("TASKQ_POLL_INTERVAL=9\n", encoding="utf-8")
    settings = WorkerSettings.load_from_dict({})
    assert (settings.max_concurrency, settings.poll_interval) == (8, 1.0)


def test_load_from_dict_rejects_unknown_keys() -> None:
    """A key that is no field is a ConfigurationError naming it."""
    with pytest.raises(ConfigurationError, match="TASKQ_MAX_CONCURENCY"):
        WorkerSettings.load_from_dict({"TASKQ_MAX_CONCURENCY": 3})


def test_client_model_rejects_worker_keys_in_code() -> None:
    """TaskQSettings.load_from_dict refuses a worker-only key (it would be silently unused)."""
    with pytest.raises(ConfigurationError, match="max_concurrency"):
        TaskQSettings.load_from_dict({"max_concurrency": 3})


def test_load_from_dict_rejects_the_same_setting_twice() -> None:
    """The same field under two spellings is ambiguous."""
    with pytest.raises(ConfigurationError, match="TASKQ_LOCK_LEASE is given twice"):
        WorkerSettings.load_from_dict({"lock_lease": 60, "TASKQ_LOCK_LEASE": 80})


def test_with_overrides_validates() -> None:
    """with_overrides applies changes and re-runs every check."""
    base = WorkerSettings.load_from_dict({"max_concurrency": 2})
    assert base.with_overrides(queues=["a"]).queues == ["a"]
    assert base.with_overrides(queues=["a"]).max_concurrency == 2
    with pytest.raises(SettingsInvariantError):
        base.with_overrides(lock_lease=10)
    with pytest.raises(ConfigurationError, match="TASKQ_IDLE_MAX_RUNTIME"):
        base.with_overrides(idle_max_runtime=-1)


def test_with_overrides_keeps_environment_values(monkeypatch: pytest.MonkeyPatch) -> None:
    """Values that came from the environment survive an override of another field."""
    monkeypatch.setenv("TASKQ_MAX_CONCURRENCY", "3")
    settings = WorkerSettings.load().with_overrides(queues=["x"])
    assert (settings.max_concurrency, settings.queues) == (3, ["x"])


def test_settings_are_immutable() -> None:
    """Assignment after loading is refused, so a validated instance stays valid."""
    settings = WorkerSettings.load()
    with pytest.raises(ValidationError, match="frozen"):
        settings.lock_lease = 1.0


# ---------------------------------------------------------------- invalid single values


def test_invalid_integer_names_variable_and_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """A non-integer TASKQ_MAX_CONCURRENCY is a ConfigurationError quoting it."""
    monkeypatch.setenv("TASKQ_MAX_CONCURRENCY", "abc")
    with pytest.raises(ConfigurationError) as info:
        WorkerSettings.load()
    assert not isinstance(info.value, SettingsInvariantError)
    message = str(info.value)
    assert "TASKQ_MAX_CONCURRENCY: Input should be a valid integer" in message
    assert "got 'abc'" in message


def test_every_invalid_value_is_listed() -> None:
    """Several bad values are reported together, each under its variable."""
    with pytest.raises(ConfigurationError) as info:
        WorkerSettings.load_from_dict(
            {"max_concurrency": 0, "log_level": "LOUD", "admin_port": 70000, "poll_interval": -1}
        )
    message = str(info.value)
    for name in (
        "TASKQ_MAX_CONCURRENCY",
        "TASKQ_LOG_LEVEL",
        "TASKQ_ADMIN_PORT",
        "TASKQ_POLL_INTERVAL",
    ):
        assert f"{name}:" in message


def test_direct_construction_raises_configuration_error() -> None:
    """The constructor converts pydantic errors too, so no caller sees a ValidationError."""
    with pytest.raises(ConfigurationError, match="TASKQ_DISPATCH_OVERSAMPLE"):
        WorkerSettings(dispatch_oversample=0)


def test_secrets_are_not_echoed() -> None:
    """An invalid DSN or Redis URL is named without repeating its password."""
    with pytest.raises(ConfigurationError) as info:
        WorkerSettings.load_from_dict(
            {"pg_dsn": "mysql://u:hunter2@h/db", "redis_url": "http://:hunter2@h"}
        )
    assert "hunter2" not in str(info.value)
    assert "TASKQ_REDIS_URL" in str(info.value)


def test_repr_redacts_passwords() -> None:
    """repr() hides DSN passwords (settings get logged)."""
    settings = WorkerSettings.load_from_dict(
        {"pg_dsn": "postgresql://u:hunter2@h/db", "redis_url": "redis://:hunter2@cache:6379/0"}
    )
    assert "hunter2" not in repr(settings)
    assert "postgresql://u:***@h/db" in repr(settings)


@pytest.mark.parametrize(
    ("url", "redacted"),
    [
        ("postgresql://u:p@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
        ("postgresql:///db?host=/tmp&password=p", "postgresql:///db?host=/tmp&password=***"),
        ("rediss://:p@h:6380/0", "rediss://:***@h:6380/0"),
    ],
)
def test_redact_url(url: str, redacted: str) -> None:
    """redact_url masks userinfo and query passwords and leaves the rest."""
    assert redact_url(url) == redacted


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("schema_name", "Jobs"),
        ("schema_name", "pg_jobs"),
        ("schema_name", "select"),
        ("schema_name", "1jobs"),
        ("prune_schedule_utc", "24:00"),
        ("archive_expiry_schedule_utc", "3pm"),
        ("prune_cron_expr", "0 3 * *"),
        ("archive_expiry_cron_expr", "0 3 * * * *"),
        ("prune_cron_expr", "0 3 * * $"),
        ("prune_cron_expr", "0 24 * * *"),
        ("archive_expiry_cron_expr", "0 0 31 4 *"),
        ("log_format", "xml"),
        ("log_level", "LOUD"),
        ("driver", "mysql"),
        ("driver", "my.adapters:"),
        ("driver", "my adapters:make"),
        ("workgroup_instance", "not-a-uuid"),
        ("redis_url", "memcached://h"),
        ("admin_port", "0"),
        ("statement_cache_size", "-1"),
        ("watchdog_tick_grace_factor", "0.5"),
        ("watchdog_check_interval", "0"),
        ("idle_settle_window", "-1"),
        ("idle_poll_interval", "0"),
        ("heartbeat_command_timeout", "nan"),
        ("max_pending_lock_timeout_ms", "inf"),
        ("health_socket_path", ""),
        ("health_pg_ping_timeout", "1.5"),  # the probe's 2 s must hold the /ready wait
        ("prune_batch_size", "0"),
    ],
)
def test_invalid_value_names_its_variable(field: str, bad: str) -> None:
    """Each field's own rule refuses a bad value with a ConfigurationError naming the variable."""
    with pytest.raises(ConfigurationError, match=f"{env_var(field)}:"):
        WorkerSettings.load_from_dict({field: bad})


def test_a_ping_timeout_the_probe_cannot_wait_for_is_one_line_naming_it() -> None:
    """3 s against `taskq health`'s 2 s budget read as "no worker answers", not a 503."""
    with pytest.raises(ConfigurationError) as info:
        WorkerSettings.load_from_dict({"health_pg_ping_timeout": "3"})
    message = str(info.value)
    assert "TASKQ_HEALTH_PG_PING_TIMEOUT: must be below 1.5 s, got 3" in message
    assert "\n" not in message
    assert WorkerSettings.load_from_dict({"health_pg_ping_timeout": "1.4"}).health_pg_ping_timeout


@pytest.mark.parametrize(
    ("spec", "expected"),
    [("asyncpg", "asyncpg"), ("PSYCOPG", "psycopg"), ("acme.taskq_db:make_store", None)],
)
def test_driver_shapes(spec: str, expected: str | None) -> None:
    """TASKQ_DRIVER takes a built-in name or a module:factory path."""
    assert TaskQSettings.load_from_dict({"driver": spec}).driver == (expected or spec)


@pytest.mark.parametrize(
    "empty_field",
    ["redis_url", "environment", "worker_label", "idle_max_runtime", "prune_cron_expr"],
)
def test_empty_optional_value_means_unset(
    monkeypatch: pytest.MonkeyPatch, empty_field: str
) -> None:
    """An exported but empty optional variable reads as None."""
    monkeypatch.setenv(env_var(empty_field), "")
    assert getattr(WorkerSettings.load(), empty_field) is None


def test_schema_name_error_quotes_the_rule() -> None:
    """A bad schema name explains the identifier rule."""
    with pytest.raises(ConfigurationError, match="TASKQ_SCHEMA_NAME: schema name 'Jobs'"):
        TaskQSettings.load_from_dict({"TASKQ_SCHEMA_NAME": "Jobs"})


# ---------------------------------------------------------------- derived views


def test_timing_view_feeds_the_domain_rules() -> None:
    """.timing carries exactly the six timing values."""
    settings = WorkerSettings.load_from_dict({"lock_lease": 90, "max_heartbeat_failures": 4})
    assert settings.timing == TimingSettings(lock_lease=90.0, max_heartbeat_failures=4)


def test_watchdog_view_feeds_the_detectors() -> None:
    """.watchdog is the domain's WatchdogSettings with the configured values."""
    settings = WorkerSettings.load_from_dict(
        {"TASKQ_WATCHDOG_ENABLED": "false", "TASKQ_WATCHDOG_STALE_FLOOR": "12"}
    )
    assert settings.watchdog == WatchdogSettings(enabled=False, stale_floor=12.0)


@pytest.mark.parametrize(("notify", "expected"), [(True, 5.0), (False, 0.5)])
def test_effective_poll_interval(notify: bool, expected: float) -> None:
    """With NOTIFY on the fallback poll is notify_poll_interval, else poll_interval."""
    settings = WorkerSettings.load_from_dict({"notify_enabled": notify, "poll_interval": 0.5})
    assert settings.effective_poll_interval == expected


@pytest.mark.parametrize(
    ("status", "days"),
    [("succeeded", 1), ("failed", 2), ("cancelled", 3), ("abandoned", 4), ("crashed", 4), ("x", 5)],
)
def test_prune_retention_for_status(status: str, days: int) -> None:
    """Per-status retention, crashed shares abandoned, anything else the global period."""
    settings = WorkerSettings.load_from_dict(
        {
            "prune_retention_succeeded": "1d",
            "prune_retention_failed": "2d",
            "prune_retention_cancelled": "3d",
            "prune_retention_abandoned": "4d",
            "prune_retention_period": "5d",
        }
    )
    assert settings.prune_retention_for(status) == timedelta(days=days)


def test_inert_settings_names_only_those_set_to_something_else() -> None:
    """Accepted but not acted on: the worker warns about each one an operator changed."""
    from taskq.app.settings import WorkerSettings as WS

    assert WS.load_from_dict({}).inert_settings() == []
    assert (
        WS.load_from_dict({"health_enabled": True, "dispatch_oversample": 2}).inert_settings() == []
    )
    # The health socket is built: turning it off or moving it is acted on, never named.
    assert (
        WS.load_from_dict(
            {"health_enabled": False, "health_socket_path": "/run/w.sock"}
        ).inert_settings()
        == []
    )
    changed = WS.load_from_dict(
        {
            # Acted on (the spans): never named.
            "TASKQ_WORKER_GROUP": "billing",
            "TASKQ_OTEL_ENABLED": "false",
            "TASKQ_DISPATCH_OVERSAMPLE": 3,
            "TASKQ_PG_DSN_POOLED": "postgresql://bouncer:6432/db",
        }
    ).inert_settings()
    assert changed == [
        "TASKQ_DISPATCH_OVERSAMPLE",
        "TASKQ_PG_DSN_POOLED",
    ]


@pytest.mark.parametrize(
    ("field", "variable"),
    [
        ("poll_interval", "TASKQ_POLL_INTERVAL"),
        ("heartbeat_command_timeout", "TASKQ_HEARTBEAT_COMMAND_TIMEOUT"),
        ("idle_max_runtime", "TASKQ_IDLE_MAX_RUNTIME"),
        ("watchdog_stale_floor", "TASKQ_WATCHDOG_STALE_FLOOR"),
        ("lock_lease", "TASKQ_LOCK_LEASE"),
        ("termination_grace_period", "TASKQ_TERMINATION_GRACE_PERIOD"),
    ],
)
def test_seconds_too_large_for_timers_are_refused_naming_the_variable(
    field: str, variable: str
) -> None:
    """1e12 s would overflow timers and timestamps at run time: one line naming it."""
    with pytest.raises(ConfigurationError) as caught:
        WorkerSettings.load_from_dict({field: 1e12})
    message = str(caught.value)
    assert variable in message
    assert "must be at most 3153600000 s" in message
    assert "\n" not in message


def test_a_duration_too_long_for_timestamps_is_refused_naming_the_variable() -> None:
    """A million weeks fits a timedelta but not ``now - retention``."""
    with pytest.raises(ConfigurationError, match=r"TASKQ_PRUNE_RETENTION_PERIOD: .*at most"):
        WorkerSettings.load_from_dict({"prune_retention_period": "1000000w"})


def test_a_lock_budget_postgres_would_refuse_is_refused_naming_the_variable() -> None:
    with pytest.raises(ConfigurationError, match=r"TASKQ_UNIQUE_LOCK_TIMEOUT_MS: .*2147483647"):
        TaskQSettings.load_from_dict({"unique_lock_timeout_ms": 1e12})


def test_a_heartbeat_command_timeout_not_below_the_lease_is_refused_at_load() -> None:
    with pytest.raises(ConfigurationError, match=r"TASKQ_HEARTBEAT_COMMAND_TIMEOUT \(20.0\)"):
        WorkerSettings.load_from_dict(
            {
                "heartbeat_command_timeout": 20,
                "lock_lease": 20,
                "watchdog_enabled": False,
                "heartbeat_interval": 5,
                "cancellation_grace_period": 5,
                "cleanup_grace_period": 5,
            }
        )
