"""The distribution is ``taskq-pg`` (PyPI's ``taskq`` is another project); imports say taskq."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from taskq.app.cli.root import DISTRIBUTION

REPO = Path(__file__).resolve().parents[3]
#: ``pip install taskq``, ``pip install 'taskq[extra]'``: TaskQ under the name it does not own.
BARE_NAME = re.compile(r"pip install\s+(?:--?\S+\s+)*['\"]?taskq(?![\w-])")


def _project_name() -> str:
    with (REPO / "pyproject.toml").open("rb") as f:
        name: str = tomllib.load(f)["project"]["name"]
    return name


def test_the_distribution_is_named_taskq_pg() -> None:
    """``taskq --version`` asks for the distribution pyproject.toml declares."""
    assert _project_name() == "taskq-pg"
    assert _project_name() == DISTRIBUTION


def _texts() -> list[Path]:
    docs = sorted((REPO / "docs").rglob("*.md"))
    code = sorted((REPO / "src").rglob("*.py")) + sorted((REPO / "contracts").rglob("*.py"))
    scripts = sorted(p for p in (REPO / "scripts").iterdir() if p.is_file())
    return [REPO / "README.md", *docs, *code, *scripts]


def test_no_install_line_names_the_bare_taskq_distribution() -> None:
    """Every ``pip install`` of TaskQ in the docs, hints and scripts says ``taskq-pg``."""
    offenders = [
        f"{path.relative_to(REPO)}:{n}: {line.strip()}"
        for path in _texts()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if BARE_NAME.search(line)
    ]
    assert offenders == []


def test_the_contract_suite_page_installs_the_contracts_extra() -> None:
    text = (REPO / "docs" / "contract-suite.md").read_text(encoding="utf-8")
    assert "pip install 'taskq-pg[contracts]'" in text
