"""``taskq worker``: flags, registry errors, and a real until-idle run on the memory driver."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from taskq.app.cli import app

MEMORY_ENV = {
    "TASKQ_DRIVER": "taskq.app.composition:memory_worker_ports",
    "TASKQ_IDLE_SETTLE_WINDOW": "0",
    "TASKQ_LOG_FORMAT": "console",
}


@pytest.fixture(autouse=True)
def _restore_root_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_generator_registry_exits_1_with_the_reason() -> None:
    """--actors naming a generator is refused before anything starts."""
    result = CliRunner().invoke(
        app, ["worker", "--actors", "tests.unit.app.worker.registries:one_shot"], env=MEMORY_ENV
    )
    assert result.exit_code == 1
    assert "one-shot" in result.output


def test_unknown_module_exits_1() -> None:
    """An --actors spec that does not import exits 1 naming the spec."""
    result = CliRunner().invoke(app, ["worker", "--actors", "nowhere_xyz:registry"])
    assert result.exit_code == 1
    assert "nowhere_xyz:registry" in result.output


@pytest.mark.parametrize("attr", ["registry", "registry_map"])
def test_until_idle_run_exits_0(attr: str) -> None:
    """A list or mapping registry, --queues and --until-idle: the worker drains and exits 0."""
    result = CliRunner().invoke(
        app,
        [
            "worker",
            "--actors",
            f"tests.unit.app.worker.registries:{attr}",
            "--queues",
            "default",
            "--queues",
            "other",
            "--max-concurrency",
            "2",
            "--until-idle",
        ],
        env=MEMORY_ENV,
    )
    assert result.exit_code == 0, result.output
    assert "worker-started" in result.output
    assert 'queues=["default", "other"]' in result.output
    assert "max_concurrency=2" in result.output


def test_bad_setting_exits_1() -> None:
    """An invalid TASKQ_* value is reported on one line and exits 1."""
    result = CliRunner().invoke(
        app,
        ["worker", "--actors", "tests.unit.app.worker.registries:registry"],
        env={**MEMORY_ENV, "TASKQ_MAX_CONCURRENCY": "lots"},
    )
    assert result.exit_code == 1
    assert "TASKQ_MAX_CONCURRENCY" in result.output
