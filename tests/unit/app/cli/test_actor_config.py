"""``taskq actor-config set|get|list|diff`` on the memory adapter, through the real entry point."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from tests.unit.app.cli.conftest import Cli

from taskq.domain.actor_config import ActorConfig

REGISTRY = "tests.unit.app.cli.registry_fixture:registry"
CHARGE = ActorConfig(
    actor="charge",
    queue="payments",
    max_concurrent=5,
    max_pending=100,
    result_ttl=timedelta(hours=1),
)


@pytest.fixture
def charge_row(cli: Cli) -> Cli:
    """The backend holds charge's row, as a worker's start would have written it."""
    cli.on_store(lambda s: s.sync_actor_configs([CHARGE]))
    return cli


def test_set_changes_only_the_given_fields_and_get_reads_them(charge_row: Cli) -> None:
    """set --max-concurrent changes that field alone (stored: the store reads it back); get
    --json shows the row."""
    cli = charge_row
    code, out, err = cli("actor-config", "set", "charge", "--max-concurrent", "20", "--json")
    assert (code, err) == (0, "")
    assert json.loads(out) == {
        "actor": "charge",
        "queue": "payments",
        "metadata": {},
        "max_concurrent": 20,
        "max_pending": 100,
        "result_ttl_seconds": 3600.0,
    }
    stored = cli.on_store(lambda s: s.get_actor_config("charge"))
    assert stored is not None
    assert (stored.max_concurrent, stored.max_pending) == (20, 100)
    code, out, _ = cli("actor-config", "get", "charge", "--json")
    assert json.loads(out)["max_concurrent"] == 20


def test_clear_writes_null_and_says_what_null_means(charge_row: Cli) -> None:
    """--clear-* stores NULL; get says unlimited for max_concurrent, the literal for the
    others; --result-ttl takes a duration."""
    cli = charge_row
    code, _, _ = cli(
        "actor-config",
        "set",
        "charge",
        "--clear-max-concurrent",
        "--clear-max-pending",
        "--result-ttl",
        "90m",
    )
    assert code == 0
    stored = cli.on_store(lambda s: s.get_actor_config("charge"))
    assert stored is not None
    assert (stored.max_concurrent, stored.max_pending, stored.result_ttl) == (
        None,
        None,
        timedelta(minutes=90),
    )
    code, out, _ = cli("actor-config", "get", "charge")
    assert "max_concurrent: unlimited" in out
    assert "max_pending:    the @actor literal" in out
    assert "result_ttl:     1h 30m" in out
    cli("actor-config", "set", "charge", "--clear-result-ttl")
    code, out, _ = cli("actor-config", "get", "charge")
    assert "result_ttl:     the @actor literal" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nobody", "--max-pending", "1"], "actor 'nobody' has no actor_config row"),
        (["charge"], "nothing to change"),
        (
            ["charge", "--max-pending", "1", "--clear-max-pending"],
            "--max-pending and --clear-max-pending contradict each other",
        ),
        (["charge", "--result-ttl", "soon"], "'soon' is not a duration"),
        (["charge", "--max-concurrent", "-1"], "Invalid value for '--max-concurrent'"),
    ],
)
def test_set_refusals_are_one_line_and_exit_1(
    charge_row: Cli, args: list[str], message: str
) -> None:
    """A name without a row, no change, contradicting flags or a bad value: one line, exit
    1, and the row unchanged."""
    code, out, err = charge_row("actor-config", "set", *args)
    assert (code, out) == (1, "")
    assert len(err.splitlines()) == 1
    assert message in err
    assert charge_row.on_store(lambda s: s.get_actor_config("charge")) == CHARGE


def test_get_of_an_actor_without_a_row_names_it(cli: Cli) -> None:
    """get of an unknown actor: one line naming it, exit 1."""
    code, _, err = cli("actor-config", "get", "ghost")
    assert code == 1
    assert err.startswith("taskq: actor 'ghost' has no actor_config row")


def test_list_shows_every_row(charge_row: Cli) -> None:
    """list --json is one object per row; the table has one row per actor."""
    code, out, _ = charge_row("actor-config", "list", "--json")
    assert [c["actor"] for c in json.loads(out)] == ["charge"]
    code, out, _ = charge_row("actor-config", "list")
    assert code == 0
    row = next(line for line in out.splitlines() if line.strip().startswith("charge"))
    assert row.split() == ["charge", "payments", "5", "100", "1h"]


def test_diff_names_missing_rows_overrides_and_drift(charge_row: Cli) -> None:
    """diff against a registry: send has no row (missing), charge's tuned max_concurrent
    is an override (exit 0); a queue changed under charge is drift (exit 3)."""
    cli = charge_row
    cli("actor-config", "set", "charge", "--max-concurrent", "20")
    code, out, _ = cli("actor-config", "diff", "--actors", REGISTRY, "--json")
    assert code == 0
    assert [(d["actor"], d["kind"], d["field"]) for d in json.loads(out)] == [
        ("charge", "override", "max_concurrent"),
        ("send", "missing", None),
    ]
    override = json.loads(out)[0]
    assert (override["stored"], override["registered"]) == (20, 5)

    cli.on_store(
        lambda s: s.sync_actor_configs([ActorConfig(actor="charge", queue="old")], force=True)
    )
    code, out, _ = cli("actor-config", "diff", "--actors", REGISTRY)
    assert code == 3
    drift = next(line for line in out.splitlines() if "drift" in line)
    assert drift.split() == ["charge", "drift", "queue", "old", "payments"]


def test_durations_read_alike_in_tables_and_json(charge_row: Cli) -> None:
    """A result_ttl shows as set takes it in get, list and the diff table (1.5s, 1h 30m,
    never `1s` or `5400.0`); --json keeps numeric seconds. A name in diff is unquoted."""
    cli = charge_row
    cli("actor-config", "set", "charge", "--result-ttl", "1.5")
    _, out, _ = cli("actor-config", "get", "charge")
    assert "result_ttl:     1.5s" in out
    _, out, _ = cli("actor-config", "get", "charge", "--json")
    assert json.loads(out)["result_ttl_seconds"] == 1.5
    _, out, _ = cli("actor-config", "list")
    assert out.splitlines()[-1].split() == ["charge", "payments", "5", "100", "1.5s"]

    cli("actor-config", "set", "charge", "--result-ttl", "90m")
    _, out, _ = cli("actor-config", "diff", "--actors", REGISTRY)
    row = next(line for line in out.splitlines() if "result_ttl" in line)
    assert row.split() == ["charge", "override", "result_ttl", "1h", "30m", "1h"]
    _, out, _ = cli("actor-config", "diff", "--actors", REGISTRY, "--json")
    override = next(d for d in json.loads(out) if d["field"] == "result_ttl")
    assert (override["stored"], override["registered"]) == (5400.0, 3600.0)


def test_diff_with_a_bad_registry_is_one_line(cli: Cli) -> None:
    """diff --actors naming no module: one line, exit 1."""
    code, _, err = cli("actor-config", "diff", "--actors", "no.such.module:registry")
    assert code == 1
    assert len(err.splitlines()) == 1


def test_a_result_ttl_past_the_limit_is_refused_in_one_line(charge_row: Cli) -> None:
    """set --result-ttl past 365,250 days (what @actor allows) exits 1 with one line and
    leaves the row alone: before, it was stored and each success's expiry (year 12978)
    broke `jobs list`."""
    cli = charge_row
    code, out, err = cli("actor-config", "set", "charge", "--result-ttl", "4000000d")
    assert (code, out) == (1, "")
    assert err.count("\n") == 1
    assert err.startswith("taskq: --result-ttl is at most 365,250 days")
    stored = cli.on_store(lambda s: s.get_actor_config("charge"))
    assert stored == CHARGE


def test_a_stored_time_no_reader_can_load_is_one_line(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A driver's OverflowError decoding a timestamp past year 9999 (asyncpg: `date value
    out of range`) is one line saying how to find the row, exit 1, not a traceback."""
    from taskq.adapters.memory.store import MemoryQueueStore

    async def overflow(self: object, *args: object, **kwargs: object) -> object:
        raise OverflowError("date value out of range")

    monkeypatch.setattr(MemoryQueueStore, "list_jobs", overflow)
    code, out, err = cli("jobs", "list")
    assert (code, out) == (1, "")
    assert err.count("\n") == 1
    assert err.startswith("taskq: a stored row holds a time Python cannot read")
    assert "WHERE created_at > '9999-12-31'" in err


@pytest.mark.parametrize("flag", ["--max-concurrent", "--max-pending"])
def test_a_count_past_int32_is_refused_in_one_line(charge_row: Cli, flag: str) -> None:
    """--max-concurrent/--max-pending 2147483648 is one line "at most 2,147,483,647", exit
    1, the row unchanged: before, the driver's `out of int32 range` text leaked."""
    cli = charge_row
    code, out, err = cli("actor-config", "set", "charge", flag, "2147483648")
    assert (code, out) == (1, "")
    assert err == (
        f"taskq: {flag} is at most 2,147,483,647 (what a store's integer column holds), "
        "got 2,147,483,648\n"
    )
    assert cli.on_store(lambda s: s.get_actor_config("charge")) == CHARGE
