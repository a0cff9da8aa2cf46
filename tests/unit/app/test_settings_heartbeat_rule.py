"""The worker settings apply the heartbeat-versus-watchdog timing rule at load."""

from __future__ import annotations

import pytest

from taskq.app.settings import WorkerSettings
from taskq.domain.errors import SettingsInvariantError


def test_worker_settings_refuse_it_at_load() -> None:
    """The worker's settings model refuses the combination, naming the variables."""
    with pytest.raises(SettingsInvariantError) as info:
        WorkerSettings.load_from_dict({"heartbeat_command_timeout": 25})
    line, partition = info.value.violations
    assert "silent network partition" in partition
    assert "TASKQ_HEARTBEAT_COMMAND_TIMEOUT (25.0)" in line
    assert "TASKQ_WATCHDOG_STALE_FLOOR (30.0)" in line
    settings = WorkerSettings.load_from_dict(
        {"heartbeat_command_timeout": 25, "watchdog_stale_floor": 51}
    )
    assert settings.timing.heartbeat_stale_after == 51.0
