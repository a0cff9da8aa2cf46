"""docs/cli.md documents exactly the options each command's real ``--help`` shows, and
every command of every group has its section."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from taskq.app.cli import main

DOC = Path(__file__).resolve().parents[4] / "docs" / "cli.md"
GROUPS = ("migrate", "health", "jobs", "workers", "queues", "actor-config", "cron", "workgroup")
#: The commands that are no group: their section is ### `taskq worker`.
SINGLE = ("worker", "demo")
#: A section heading: ### `taskq jobs list` or ### `taskq worker` (arguments ignored).
HEADING = re.compile(r"^### `taskq ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?[^`]*`$", re.MULTILINE)
#: An option as the help lists it: at the start of a row of its Options panel.
HELP_OPTION = re.compile(r"^│\s+(?:\*\s+)?(--[a-z][a-z-]*)", re.MULTILINE)
#: An option as a section's table lists it: `--name` or `--name VALUE`, in the first column.
DOC_OPTION = re.compile(r"`(--[a-z][a-z-]*)[^`]*`")


def documented() -> dict[tuple[str, ...], set[str]]:
    """Each section's command and the options its table names."""
    text = DOC.read_text(encoding="utf-8")
    sections: dict[tuple[str, ...], set[str]] = {}
    headings = list(HEADING.finditer(text))
    for heading, following in zip(headings, [*headings[1:], None], strict=True):
        body = text[heading.end() : following.start() if following else len(text)]
        first_columns = [row.split("|")[1] for row in body.splitlines() if row.startswith("| `--")]
        options = {m.group(1) for cell in first_columns for m in DOC_OPTION.finditer(cell)}
        sections[tuple(name for name in heading.groups() if name)] = options
    return sections


def help_of(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    with pytest.raises(SystemExit) as stop:
        main([*args, "--help"])
    assert stop.value.code in (0, None)
    return capsys.readouterr().out


def commands_of(capsys: pytest.CaptureFixture[str], group: str) -> set[str]:
    """The sub-commands the group's help lists."""
    out = help_of(capsys, group)
    panel = out.split("Commands")[1]
    return set(re.findall(r"^│ ([a-z][a-z-]*)\s", panel, re.MULTILINE))


def test_every_command_has_a_section(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each command the groups' help lists, and each single command, is a section of
    docs/cli.md, and no section names a command that does not exist."""
    monkeypatch.setenv("COLUMNS", "200")
    real: set[tuple[str, ...]] = {
        (group, command) for group in GROUPS for command in commands_of(capsys, group)
    }
    real |= {(command,) for command in SINGLE}
    assert real == set(documented())


def test_every_top_level_command_is_checked(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command added to ``taskq`` must join GROUPS or SINGLE, so its section is checked."""
    monkeypatch.setenv("COLUMNS", "200")
    panel = help_of(capsys).split("Commands")[1]
    assert set(re.findall(r"^│ ([a-z][a-z-]*)\s", panel, re.MULTILINE)) == {*GROUPS, *SINGLE}


@pytest.mark.parametrize("command", sorted(documented()), ids=" ".join)
def test_documented_options_match_the_help(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: tuple[str, ...],
) -> None:
    """The options a section's table lists are exactly those of the command's --help."""
    monkeypatch.setenv("COLUMNS", "200")
    shown = set(HELP_OPTION.findall(help_of(capsys, *command))) - {"--help"}
    assert shown, "no option found in the help: did its layout change?"
    assert documented()[command] == shown
