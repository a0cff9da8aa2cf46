"""``taskq --version``, and help that reads plainly at 80 columns."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib.metadata import version
from itertools import pairwise
from typing import Any

import pytest

from taskq.app.cli.root import DISTRIBUTION, app
from taskq.domain.status import JobStatus

COMMANDS = [
    ("worker",),
    ("migrate", "up"),
    ("jobs", "list"),
    ("actor-config", "diff"),
]


def taskq(*args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TASKQ_")}
    env.update(COLUMNS=str(columns), TERMINAL_WIDTH=str(columns), NO_COLOR="1")
    return subprocess.run(
        [sys.executable, "-m", "taskq.app.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_version_prints_the_installed_distribution_version() -> None:
    run = taskq("--version")
    assert run.returncode == 0, run.stderr
    assert run.stdout == f"taskq {version(DISTRIBUTION)}\n"


def options_of(*command: str) -> set[str]:
    import typer

    group = typer.main.get_group(app)
    found: Any = group.get_command(None, command[0])  # type: ignore[arg-type]
    for name in command[1:]:
        found = found.commands[name]
    return {opt for p in found.params for opt in p.opts if opt.startswith("--")}


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_at_80_columns_shows_every_option_whole_and_no_type_noise(
    command: tuple[str, ...],
) -> None:
    run = taskq(*command, "--help")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines, "no help printed"
    assert max(len(line) for line in lines) <= 80
    shown = set(re.findall(r"^│\s+(?:\*\s+)?(--[a-z][a-z-]*)(?=\s)", run.stdout, re.MULTILINE))
    assert options_of(*command) | {"--help"} == shown
    assert "…" not in "".join(line[:40] for line in lines)
    assert "<bool>" not in run.stdout
    assert "<str>" not in run.stdout


@pytest.mark.parametrize(
    "command",
    [("queues",), ("queues", "list"), ("actor-config", "set"), ("actor-config", "diff")],
    ids=" ".join,
)
def test_help_text_wraps_at_the_terminal_not_where_the_docstring_breaks(
    command: tuple[str, ...],
) -> None:
    # These docstrings break their lines near 100 columns: kept, at 80 columns a sentence
    # would stop after a few words ("home to a") and go on on the next line. (A short line
    # that ends a sentence is the end of a paragraph.)
    run = taskq(*command, "--help")
    assert run.returncode == 0, run.stderr
    # The description and the command list; the option tables have narrow columns.
    lines: list[str] = []
    in_table = False
    for line in run.stdout.splitlines():
        if line.startswith("╭"):
            in_table = "Commands" not in line
        elif not in_table:
            lines.append(line.strip(" │"))
    stubs = [
        (line, after)
        for line, after in pairwise(lines)
        if line and len(line) < 40 and not line.endswith((".", ")")) and after[:1].islower()
    ]
    assert stubs == []


def test_a_long_choice_list_is_shown_in_the_help_whole() -> None:
    # In the type column, `<pending|scheduled|running|succeeded|...>` broke mid-word.
    run = taskq("jobs", "list", "--help")
    assert run.returncode == 0, run.stderr
    assert "STATUS" in run.stdout
    for status in JobStatus:
        assert re.search(rf"\b{status.value}\b", run.stdout), status
    assert "|" not in run.stdout.replace("│", "")


def test_a_mistyped_command_suggests_the_near_names() -> None:
    # The top-level group builds its commands lazily, so Typer had no names to suggest from.
    run = taskq("job", "list")
    assert run.returncode == 1
    assert run.stderr == "taskq: No such command 'job'. Did you mean 'jobs'?\n"


def test_a_missing_sub_command_names_the_ones_that_may_follow() -> None:
    run = taskq("health")
    assert run.returncode == 1
    assert run.stderr == (
        "taskq: health: Missing command: one of live, ready, metrics, tasks (taskq health --help)\n"
    )


@pytest.mark.parametrize(
    ("command", "shown"),
    [(("jobs", "get"), "ID      INTEGER"), (("actor-config", "set"), "NAME      TEXT")],
    ids=lambda value: " ".join(value) if isinstance(value, tuple) else value,
)
def test_an_argument_s_type_is_a_word_as_an_option_s_is(
    command: tuple[str, ...], shown: str
) -> None:
    run = taskq(*command, "--help")
    assert run.returncode == 0, run.stderr
    assert shown in run.stdout
    assert "<int>" not in run.stdout
    assert "<str>" not in run.stdout


@pytest.mark.parametrize("command", [(), ("worker",), ("jobs", "list")], ids=" ".join)
def test_dash_h_is_help_as_dash_dash_help_is(command: tuple[str, ...]) -> None:
    short, long = taskq(*command, "-h"), taskq(*command, "--help")
    assert short.returncode == 0, short.stderr
    assert short.stdout == long.stdout
