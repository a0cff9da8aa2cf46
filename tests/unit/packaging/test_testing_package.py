"""``taskq.testing``: what adapter authors import, and a plugin that costs others nothing."""

from __future__ import annotations

import json
import subprocess
import sys

import taskq.testing
from taskq.adapters.memory import FakeClock
from taskq.testing import harness


def test_the_harness_names_are_public() -> None:
    assert taskq.testing.Harness is harness.Harness
    assert taskq.testing.HarnessFactory is harness.HarnessFactory
    assert taskq.testing.EPOCH is harness.EPOCH
    assert taskq.testing.FakeClock is FakeClock


def test_loading_the_pytest_plugin_imports_no_port_or_adapter() -> None:
    """pytest loads the entry point in every project that installs TaskQ: it stays light."""
    code = (
        "import json, sys; import taskq.testing.plugin; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('taskq.'))))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(run.stdout)
    assert loaded == ["taskq.testing", "taskq.testing.factory", "taskq.testing.plugin"]
