"""docs/cli.md documents exactly the options each operator command's real ``--help`` shows,
and every command of the operator groups has its section."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from taskq.app.cli import main

DOC = Path(__file__).resolve().parents[4] / "docs" / "cli.md"
GROUPS = ("jobs", "workers", "queues", "actor-config", "cron", "workgroup")
#: A section heading: ### `taskq jobs list` (arguments after the command's name ignored).
HEADING = re.compile(r"^### `taskq ([a-z-]+) ([a-z-]+)[^`]*`$", re.MULTILINE)
#: An option as the help lists it: at the start of a row of its Options panel.
HELP_OPTION = re.compile(r"^│\s+(?:\*\s+)?(--[a-z][a-z-]*)", re.MULTILINE)
#: An option as a section's table lists it: `--name` or `--name VALUE`, in the first column.
DOC_OPTION = re.compile(r"`(--[a-z][a-z-]*)[^`]*`")


def documented() -> dict[tuple[str, str], set[str]]:
    """Each section's command and the options its table names."""
    text = DOC.read_text(encoding="utf-8")
    sections: dict[tuple[str, str], set[str]] = {}
    headings = list(HEADING.finditer(text))
    for heading, following in zip(headings, [*headings[1:], None], strict=True):
        body = text[heading.end() : following.start() if following else len(text)]
        first_columns = [row.split("|")[1] for row in body.splitlines() if row.startswith("| `--")]
        options = {m.group(1) for cell in first_columns for m in DOC_OPTION.finditer(cell)}
        sections[(heading.group(1), heading.group(2))] = options
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


def test_every_operator_command_has_a_section(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each command the groups' help lists is a section of docs/cli.md, and no section
    names a command that does not exist."""
    monkeypatch.setenv("COLUMNS", "200")
    real = {(group, command) for group in GROUPS for command in commands_of(capsys, group)}
    assert real == set(documented())


@pytest.mark.parametrize("command", sorted(documented()), ids=" ".join)
def test_documented_options_match_the_help(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: tuple[str, str]
) -> None:
    """The options a section's table lists are exactly those of the command's --help."""
    monkeypatch.setenv("COLUMNS", "200")
    shown = set(HELP_OPTION.findall(help_of(capsys, *command))) - {"--help"}
    assert shown, "no option found in the help: did its layout change?"
    assert documented()[command] == shown
