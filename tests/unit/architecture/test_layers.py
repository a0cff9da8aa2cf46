"""The layer rule, checked on the source itself (import-linter checks it too)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[3] / "src" / "taskq"


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


DOMAIN_FILES = sorted((SRC / "domain").rglob("*.py"))


@pytest.mark.parametrize("path", DOMAIN_FILES, ids=lambda p: p.name)
def test_domain_imports_only_the_standard_library(path: Path) -> None:
    """Every domain module imports only the standard library and the domain itself."""
    bad = [
        name
        for name in _imports(path)
        if not name.startswith("taskq.domain")
        and name.split(".")[0] not in sys.stdlib_module_names
        and name != "__future__"
    ]
    assert bad == [], f"{path.name} imports {bad}"


def test_domain_does_not_use_asyncio() -> None:
    """The domain decides; it never schedules: no asyncio anywhere in it."""
    users = [p.name for p in DOMAIN_FILES if "asyncio" in _imports(p)]
    assert users == []


def test_only_the_composition_root_names_adapters() -> None:
    """Inside app/, only the composition package imports taskq.adapters."""
    offenders = [
        str(p.relative_to(SRC))
        for p in sorted((SRC / "app").rglob("*.py"))
        if p.parent != SRC / "app" / "composition"
        and any(n.startswith("taskq.adapters") for n in _imports(p))
    ]
    assert offenders == []
