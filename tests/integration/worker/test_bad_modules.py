"""Modules that fail on import or when called: one ``taskq:`` line and exit 1, no traceback.

The modules are written into the worker's working directory, which ``python -m``
puts first on its path.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.integration.worker.support import FAST_WORKER_ENV, WorkerSpawner
from tests.integration.worker.test_bad_input import assert_refused

pytestmark = pytest.mark.integration

MODULES = {
    "drv.py": (
        "def raises(settings):\n    raise RuntimeError('factory boom')\n"
        "async def async_raises(settings):\n    raise ValueError('async factory boom')\n"
        "def wrong_sig():\n    return None\n"
        "def exits(settings):\n    raise SystemExit(3)\n"
    ),
    "syntax_err.py": "def f(:\n",
    "raises_on_import.py": "raise RuntimeError('kaboom at import postgresql://u:hunter2@h/db')\n",
    "exits_on_import.py": "import sys\nsys.exit(0)\n",
    "interrupts_on_import.py": "raise KeyboardInterrupt\n",
}
#: Never connected to: every failure here comes first.
ENV = {**FAST_WORKER_ENV, "TASKQ_PG_DSN": "postgresql://postgres@127.0.0.1:1/none"}


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[WorkerSpawner]:
    spawner = WorkerSpawner(tmp_path / "workers")
    spawner.log_dir.mkdir(parents=True)
    for name, text in MODULES.items():
        (spawner.log_dir / name).write_text(text)
    try:
        yield spawner
    finally:
        spawner.cleanup()


@pytest.mark.parametrize(
    ("driver", "needle"),
    [
        ("drv:raises", "the factory failed: RuntimeError: factory boom"),
        ("drv:async_raises", "the factory failed: ValueError: async factory boom"),
        ("drv:wrong_sig", "TypeError: wrong_sig() takes 0 positional arguments"),
        ("drv:exits", "it called sys.exit(3)"),
        ("syntax_err:f", "importing syntax_err failed: SyntaxError"),
        ("raises_on_import:f", "importing raises_on_import failed: RuntimeError: kaboom"),
    ],
)
async def test_a_failing_driver_factory_is_one_line(
    workers: WorkerSpawner, driver: str, needle: str
) -> None:
    """TASKQ_DRIVER=module:factory failing anyhow printed a raw traceback before."""
    proc = workers.start({**ENV, "TASKQ_DRIVER": driver})
    line = assert_refused(proc, await proc.wait(within=30), f"TASKQ_DRIVER={driver}: ", needle)
    assert "hunter2" not in line


@pytest.mark.parametrize(
    ("module", "needle"),
    [("exits_on_import", "called sys.exit(0)"), ("interrupts_on_import", "KeyboardInterrupt")],
)
async def test_an_actors_module_that_exits_on_import_is_refused(
    workers: WorkerSpawner, module: str, needle: str
) -> None:
    """An actors module calling sys.exit(0) on import (argparse, say) made the worker
    exit 0 silently; now exit 1 naming the module."""
    proc = workers.start(ENV, registry=f"{module}:registry")
    assert_refused(proc, await proc.wait(within=30), f"{module}:registry", needle)
