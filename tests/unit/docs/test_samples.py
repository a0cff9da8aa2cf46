"""The guides' Python blocks follow the sample convention (tests/unit/docs/samples.py):
each compiles, a fragment marker always marks a Python block, and fragments stay few.
tests/integration/docs/ runs the rest."""

from __future__ import annotations

import ast
import re

import pytest
from tests.unit.docs.samples import FRAGMENT_MARKER, GUIDES, REPO, Block, python_blocks

BLOCKS = [block for page in GUIDES for block in python_blocks(page)]
#: Pieces of larger programs that are only compiled. Prefer a sample that runs: raise
#: this only for a block that cannot (an adapter template, alternatives side by side).
FRAGMENT_BUDGET = 10


@pytest.mark.parametrize("block", BLOCKS, ids=[block.where for block in BLOCKS])
def test_every_python_block_compiles(block: Block) -> None:
    compile(block.code, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def test_every_fragment_marker_marks_a_python_block() -> None:
    """A marker before a shell block, or with a blank line missing, would mark nothing."""
    for page in GUIDES:
        markers = page.read_text(encoding="utf-8").count(FRAGMENT_MARKER)
        marked = sum(block.fragment for block in python_blocks(page))
        assert markers == marked, page.name


def test_fragments_stay_few() -> None:
    fragments = [block.where for block in BLOCKS if block.fragment]
    assert len(fragments) <= FRAGMENT_BUDGET, fragments
    assert len(BLOCKS) - len(fragments) > len(fragments), "most samples must run"


def test_the_site_build_fails_on_a_broken_link() -> None:
    """mkdocs.yml keeps the settings that make scripts/check fail on a broken link or
    anchor and on a page left out of the nav (--strict turns their warnings into errors)."""
    config = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    assert re.search(r"^strict: true$", config, re.MULTILINE)
    for check in ("omitted_files", "unrecognized_links", "anchors", "absolute_links"):
        assert re.search(rf"^  {check}: warn$", config, re.MULTILINE), check
    for page in sorted((REPO / "docs").glob("*.md")):
        assert f" {page.name}\n" in config, f"{page.name} is not in the nav"
