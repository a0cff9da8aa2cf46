"""The README's links lead somewhere: it is outside docs/, so the strict site build
(scripts/check) does not see it."""

from __future__ import annotations

import re

from tests.unit.docs.samples import REPO


def test_every_relative_link_of_the_readme_names_a_file() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text)
    assert len(targets) >= 10
    missing = [target for target in targets if not (REPO / target).is_file()]
    assert missing == []
