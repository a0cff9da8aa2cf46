"""Usage errors exit 1 with one ``taskq:`` line (exit 2 is the watchdog's); help still works."""

from __future__ import annotations

import pytest

from taskq.app.cli import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as stop:
        main(list(args))
    out, err = capsys.readouterr()
    return int(stop.value.code or 0), out, err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["worker", "--actors", "m:r", "--max-concurrency", "0"], "taskq: worker: Invalid value"),
        (["worker", "--actors", "m:r", "--max-concurrency", "abc"], "'--max-concurrency'"),
        (["worker", "--actors", "m:r", "--bogus"], "taskq: worker: No such option: --bogus"),
        (["worker"], "Missing option '--actors'"),
        (["nosuch"], "taskq: No such command 'nosuch'"),
        (["migrate", "up", "--target", "0"], "taskq: migrate up: Invalid value for '--target'"),
    ],
)
def test_a_usage_error_is_one_line_and_exit_1(
    capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    code, out, err = run(capsys, *args)
    assert code == 1
    assert out == ""
    (line,) = err.splitlines()
    assert expected in line


@pytest.mark.parametrize("args", [[], ["--help"], ["worker", "--help"], ["migrate"]])
def test_help_still_exits_0(capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    code, out, _ = run(capsys, *args)
    assert code == 0
    assert "Usage" in out


def test_max_concurrency_has_a_documented_upper_bound(capsys: pytest.CaptureFixture[str]) -> None:
    """99999999999999999999 hung silently, a million took a minute to start: both the flag
    and TASKQ_MAX_CONCURRENCY stop at 10,000."""
    from taskq.app.settings import WorkerSettings
    from taskq.domain.errors import ConfigurationError

    code, _, err = run(capsys, "worker", "--actors", "m:r", "--max-concurrency", "10001")
    assert code == 1
    assert "--max-concurrency" in err
    assert "10000" in err
    with pytest.raises(ConfigurationError, match=r"TASKQ_MAX_CONCURRENCY.*10000"):
        WorkerSettings.load_from_dict({"TASKQ_MAX_CONCURRENCY": "99999999999999999999"})
    assert WorkerSettings.load_from_dict({"max_concurrency": 10_000}).max_concurrency == 10_000


def test_idle_max_runtime_without_until_idle_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """It was silently ignored; a worker meant to stop after 600 s ran forever."""
    code, _, err = run(capsys, "worker", "--actors", "m:r", "--idle-max-runtime", "600")
    assert code == 1
    (line,) = err.splitlines()
    assert line.startswith("taskq: --idle-max-runtime applies only with --until-idle")


@pytest.mark.parametrize(
    ("variable", "expr", "problem"),
    [
        # The cron library's messages name the field that is wrong.
        ("TASKQ_PRUNE_CRON_EXPR", "60 * * * *", "cron '60 * * * *': Bad minute"),
        ("TASKQ_PRUNE_CRON_EXPR", "? * * * *", "Bad minute"),
        ("TASKQ_ARCHIVE_EXPIRY_CRON_EXPR", "*/0 * * * *", "Bad minute"),
        ("TASKQ_ARCHIVE_EXPIRY_CRON_EXPR", "1#2 * * * *", "Bad minute"),
        ("TASKQ_PRUNE_CRON_EXPR", "0 0 30 2 *", "Bad day-of-month"),
    ],
)
def test_a_cron_the_leader_cannot_run_is_refused_at_start(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    expr: str,
    problem: str,
) -> None:
    """Such a cron passed the shape check and crashed the worker once it led (or, never
    firing, silently killed the sweep): now one settings line, exit 1."""
    monkeypatch.setenv(variable, expr)
    code, _, err = run(capsys, "worker", "--actors", "m:r")
    assert code == 1
    (line,) = err.splitlines()
    assert line.startswith(f"taskq: invalid settings: {variable}: ")
    assert problem in line
