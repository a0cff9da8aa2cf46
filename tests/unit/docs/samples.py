"""The code blocks of the guides, as the sample tests read them.

The convention every guide follows (docs/contract-suite.md's neighbours included):

- A `` ```python `` block runs. The blocks of one page run in order in one namespace,
  as in ``python -m asyncio`` (top-level ``await`` allowed), so a later block may use
  what an earlier one defined.
- A block whose first line is a comment naming a file (``# myapp/actors.py``) is that
  file: it is written there in the page's working directory, which is on ``sys.path``,
  and runs when a block imports it (or at the end, if none does). A later block naming
  the same file continues it.
- A block right after the line ``<!-- sample: fragment -->`` is a piece of a larger
  program (a signature, alternatives side by side): it is only compiled. Keep these few.
- Shell blocks (``sh``, ``console``) are not run; the ``taskq`` commands in them must
  exist with the options they use (tests/unit/docs/test_shell_commands.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
#: The pages a newcomer reads: the README and every page of the site.
GUIDES = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))
FRAGMENT_MARKER = "<!-- sample: fragment -->"
_FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```[ ]*$", re.MULTILINE | re.DOTALL)
_FILE_COMMENT = re.compile(r"^# ([\w./-]+\.py)\b")


@dataclass(frozen=True, slots=True)
class Block:
    """One fenced block of a page."""

    page: Path
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    fragment: bool

    @property
    def file(self) -> str | None:
        """The path a file block names on its first line, else None."""
        match = _FILE_COMMENT.match(self.code)
        return match.group(1) if match else None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page``, in order."""
    text = page.read_text(encoding="utf-8")
    found = []
    for match in _FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        found.append(
            Block(
                page=page,
                line=text.count("\n", 0, match.start()) + 1,
                lang=match.group(1),
                code=match.group(2),
                fragment=before.strip() == FRAGMENT_MARKER,
            )
        )
    return found


def python_blocks(page: Path) -> list[Block]:
    return [block for block in blocks(page) if block.lang == "python"]


def inline_taskq_commands(page: Path) -> list[tuple[str, str]]:
    """Each inline code span of the page's prose that is a ``taskq`` command, with its
    place (``page:line``)."""
    text = page.read_text(encoding="utf-8")
    prose = _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    found = []
    for match in re.finditer(r"`((?:\S+/)?taskq [^`]+)`", prose):
        line = text.count("\n", 0, match.start()) + 1
        found.append((f"{page.relative_to(REPO)}:{line}", match.group(1)))
    return found


def shell_lines(page: Path) -> list[tuple[Block, str]]:
    """Each command line of the page's shell blocks (continuations joined, prompts and
    comments removed)."""
    lines = []
    for block in blocks(page):
        if block.lang not in ("sh", "console", "bash", "shell"):
            continue
        for raw in block.code.replace("\\\n", " ").splitlines():
            line = raw.strip().removeprefix("$ ")
            line = re.sub(r"\s+#.*$", "", line) if not line.startswith("#") else ""
            if line:
                lines.append((block, line))
    return lines
