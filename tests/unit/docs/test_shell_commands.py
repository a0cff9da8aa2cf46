"""Every ``taskq`` command a guide names exists, with the options it uses: in its shell
blocks, and in the inline code of its prose.

docs/cli.md is the reference: test_cli_reference.py checks its sections against each
command's real ``--help``, so here a command line is checked against those sections.
"""

from __future__ import annotations

import re
import shlex

import pytest
from tests.unit.app.cli.test_cli_reference import documented
from tests.unit.docs.samples import GUIDES, inline_taskq_commands, shell_lines

#: Options every command takes, which the reference does not list per section.
COMMON = {"--help"}
#: `taskq` as a guide may spell it: on the PATH or in the clone's venv.
PROGRAM = re.compile(r"^(?:\S+/)?taskq$")


def _invocations(line: str) -> list[list[str]]:
    """The words after ``taskq`` of each ``taskq`` a command line runs (pipes and
    ``xargs`` included)."""
    found = []
    for segment in line.split("|"):
        words = shlex.split(segment)
        starts = [i for i, word in enumerate(words) if PROGRAM.match(word)]
        if starts:
            found.append(words[starts[0] + 1 :])
    return found


COMMAND_LINES = [
    (where, words)
    for page in GUIDES
    for where, line in [
        *((block.where, line) for block, line in shell_lines(page)),
        *inline_taskq_commands(page),
    ]
    for words in _invocations(line)
    # Not commands: `taskq COMMAND --help` (a placeholder, in capitals), and output
    # such as `taskq workgroup: instance ...`.
    if words and not words[0].isupper() and not words[0].endswith(":")
]


def test_the_guides_run_taskq_commands() -> None:
    """The check below has something to check (the extraction still finds them)."""
    assert len(COMMAND_LINES) >= 50


@pytest.mark.parametrize(("where", "words"), COMMAND_LINES, ids=[w for w, _ in COMMAND_LINES])
def test_the_command_and_its_options_exist(where: str, words: list[str]) -> None:
    reference = documented()
    shown = f"`taskq {' '.join(words)}`"
    if words[0].startswith("--"):
        assert words[0] in ("--version", "--help"), f"{where}: {shown}"
        return
    groups = {command[0] for command in reference if len(command) == 2}
    used = {word.split("=", 1)[0] for word in words if word.startswith("--")}
    if tuple(words[:2]) in reference or tuple(words[:1]) in reference:
        command = tuple(words[:2]) if tuple(words[:2]) in reference else tuple(words[:1])
        known = reference[command]
    else:
        # A group named alone (`taskq health --socket PATH`): options of its commands.
        assert words[0] in groups, f"{where}: {shown} is no command in cli.md"
        known = set().union(*(opts for cmd, opts in reference.items() if cmd[0] == words[0]))
    unknown = used - known - COMMON
    assert not unknown, f"{where}: {shown} uses options cli.md does not list: {sorted(unknown)}"
