"""The Docker path of the test-database lookup is installed with the dev and contracts extras."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from contracts.provision import postgres_container_class

REPO = Path(__file__).resolve().parents[3]


def test_testcontainers_postgres_imports_without_warnings() -> None:
    """The class is found where testcontainers keeps it now, not through its warning shim
    (warnings are errors in this suite, so the old module name fails here)."""
    container_class = postgres_container_class()
    assert container_class is not None
    assert container_class.__name__ == "PostgresContainer"


@pytest.mark.parametrize("extra", ["dev", "contracts"])
def test_testcontainers_is_in_the_extra(extra: str) -> None:
    with (REPO / "pyproject.toml").open("rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    assert any(dep.startswith("testcontainers[postgres]") for dep in extras[extra])
