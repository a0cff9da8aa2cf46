"""Each source module holds one job, and a module that outgrows a screenful of them splits.

About 500 lines is where the modules of this codebase started mixing jobs (actors,
composition, the consumer, the enqueue paths). A file past the limit is either split or
named below with the reason it is one cohesive table.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
LIMIT = 500

#: Files allowed past the limit, each with why it is one thing.
COHESIVE: dict[str, str] = {}


def _line_counts() -> dict[str, int]:
    files = [*(ROOT / "src" / "taskq").rglob("*.py"), *(ROOT / "contracts").rglob("*.py")]
    return {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for path in files
        if "__pycache__" not in path.parts
    }


def test_no_source_module_is_over_the_limit() -> None:
    over = {
        name: lines
        for name, lines in sorted(_line_counts().items())
        if lines > LIMIT and name not in COHESIVE
    }
    assert over == {}, f"split these by responsibility (or justify in COHESIVE): {over}"
