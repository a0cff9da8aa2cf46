"""``taskq cron list`` through the real entry point: schedules and their next fire times."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from tests.unit.app.cli.conftest import Cli

REGISTRY = "tests.unit.app.cli.cron_registry_fixture:registry"


def test_list_json_shows_each_schedule_with_its_next_fire_times(cli: Cli) -> None:
    before = datetime.now(UTC)
    code, out, _ = cli("cron", "list", "--actors", REGISTRY, "--json", "--count", "2")
    assert code == 0
    rows = json.loads(out)
    assert [(r["actor"], r["cron"], r["tz"], r["payload"]) for r in rows] == [
        ("nightly", "0 3 * * *", "Europe/Berlin", {}),
        ("report", "*/15 * * * *", "UTC", {"kind": "quarter"}),
    ]
    quarter = [datetime.fromisoformat(t) for t in rows[1]["next"]]
    assert len(quarter) == 2
    assert before < quarter[0] <= before + timedelta(minutes=15)
    assert quarter[1] - quarter[0] == timedelta(minutes=15)
    assert all(t.minute % 15 == 0 and t.second == 0 for t in quarter)
    nightly = [datetime.fromisoformat(t) for t in rows[0]["next"]]
    assert all(t.astimezone(UTC).hour in (1, 2) for t in nightly)  # 03:00 CEST / CET


def test_list_prints_a_table_by_default(cli: Cli) -> None:
    code, out, _ = cli("cron", "list", "--actors", REGISTRY)
    assert code == 0
    for shown in ("ACTOR", "NEXT (UTC)", "nightly", "Europe/Berlin", "*/15 * * * *"):
        assert shown in out
    assert "unscheduled" not in out


def test_a_bad_registry_is_one_line_and_exit_1(cli: Cli) -> None:
    code, _, err = cli("cron", "list", "--actors", "no.such.module:registry")
    assert code == 1
    assert err.startswith("taskq: actor registry 'no.such.module:registry'")
    assert len(err.strip().splitlines()) == 1
