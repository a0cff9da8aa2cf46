"""The runnable example in docs/examples runs green (the docs cannot rot silently)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

EXAMPLE = Path(__file__).resolve().parents[4] / "docs" / "examples" / "worker_in_app_test.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("taskq_docs_worker_example", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_worker_in_app_test_example_passes() -> None:
    """docs/examples/worker_in_app_test.py: a worker on the memory adapter and a fake clock."""
    await _load().test_signup_emails_are_sent()
