"""Every runnable Python sample of every guide runs (tests/unit/docs/samples.py says how
a page marks its blocks), each page in a process of its own on a fresh migrated schema.

So a guide cannot drift from the code: a renamed import, a changed signature or a
removed option fails here. The quickstart's samples also run end to end, with a real
worker, in test_quickstart.py.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from contracts.provision import NoTestDatabase, migrated_schema, resolve_test_dsn
from tests.unit.docs.samples import GUIDES, REPO, python_blocks

pytestmark = pytest.mark.integration

#: Pages whose samples need a running worker: their own test runs them end to end.
END_TO_END = {"quickstart.md": "tests/integration/docs/test_quickstart.py"}
PAGES = [
    page
    for page in GUIDES
    if page.name not in END_TO_END and any(not block.fragment for block in python_blocks(page))
]


@pytest.fixture(scope="module")
def dsn() -> str:
    try:
        return resolve_test_dsn()
    except NoTestDatabase as exc:
        pytest.skip(str(exc))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
async def test_the_pages_samples_run(page: Path, dsn: str, tmp_path: Path) -> None:
    async with migrated_schema(dsn=dsn, prefix="taskq_docs") as schema:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TASKQ_")}
        env |= {
            "TASKQ_PG_DSN": schema.dsn,
            "TASKQ_SCHEMA_NAME": schema.schema,
            "PYTHONPATH": str(REPO),
        }
        result = await asyncio.to_thread(
            subprocess.run,
            [
                sys.executable,
                "-m",
                "tests.integration.docs.sample_runner",
                str(page),
                str(tmp_path),
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=100,
        )
    assert result.returncode == 0, result.stdout + result.stderr
