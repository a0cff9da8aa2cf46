"""Run as root, the demo says before the embedded Postgres starts that it runs it as
(and may add) the ``embedded_postgres`` OS user, and how to remove that user."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from taskq.adapters.postgres.embedded import ROOT_RUNS_AS
from taskq.app.demo import DemoOptions, run_demo
from taskq.app.demo import run as demo_run
from taskq.app.demo.run import EMBEDDED_OS_USER, root_user_notice
from taskq.domain.errors import ConfigurationError


def test_the_user_named_is_the_one_the_adapter_runs_the_server_as() -> None:
    assert EMBEDDED_OS_USER == ROOT_RUNS_AS


@pytest.mark.parametrize("euid", [1000, None])
def test_nothing_is_said_when_not_root(euid: int | None) -> None:
    assert root_user_notice(euid, lambda _name: False) is None


def test_root_hears_that_a_new_user_is_added_and_how_to_remove_it() -> None:
    notice = root_user_notice(0, lambda _name: False)
    assert notice is not None
    assert "\n" not in notice
    assert "a new OS user (useradd) embedded_postgres" in notice
    assert notice.endswith("userdel embedded_postgres")


def test_root_hears_when_the_user_exists_already() -> None:
    notice = root_user_notice(0, lambda name: name == "embedded_postgres")
    assert notice is not None
    assert "an existing OS user embedded_postgres" in notice
    assert "useradd" not in notice


@pytest.fixture
def as_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 0, raising=False)
    monkeypatch.setattr(demo_run, "_os_user_exists", lambda _name: False)


@pytest.mark.usefixtures("as_root")
def test_the_demo_says_it_on_stderr_before_the_server_starts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    said_before_start: list[str] = []

    def server_start(*, prefix: str) -> Iterator[None]:
        said_before_start.append(capsys.readouterr().err)
        raise ConfigurationError("the embedded extra is not installed")

    monkeypatch.setattr("taskq.app.composition.embedded_postgres_available", lambda: True)
    monkeypatch.setattr("taskq.app.composition.open_embedded_postgres", server_start)
    with pytest.raises(ConfigurationError):
        run_demo(DemoOptions(dsn=None))
    [err] = said_before_start
    assert err.startswith("taskq demo: running as root")
    assert err.count("\n") == 1
    assert "userdel embedded_postgres" in err


@pytest.mark.usefixtures("as_root")
def test_without_the_embedded_extra_root_hears_only_that_there_is_no_database(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The notice would announce a server (and an OS user) that cannot start.
    monkeypatch.setattr("taskq.app.composition.embedded_postgres_available", lambda: False)
    with pytest.raises(ConfigurationError, match="no database for the demo: set TASKQ_PG_DSN"):
        run_demo(DemoOptions(dsn=None))
    assert "running as root" not in capsys.readouterr().err
