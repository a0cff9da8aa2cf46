"""The worker's start-up check asks a store for the roles a worker uses, not the operator's.

A custom store written before ``JobAdmin`` existed keeps running workers; only the
operator commands need ``list_jobs``, ``retry_job`` and ``worker_status`` (the CLI
tests check their refusal).
"""

from __future__ import annotations

import pytest
from tests.unit.app.cli.memory_driver import ports_without_admin

from taskq.app.port_check import check_port, check_worker_ports
from taskq.app.settings import WorkerSettings
from taskq.domain.errors import ConfigurationError
from taskq.ports.queue_store import QueueStore


def test_a_store_without_the_operator_role_passes_the_worker_check() -> None:
    ports = ports_without_admin(WorkerSettings.load_from_dict({}))
    check_worker_ports(ports)  # no error: the worker never calls JobAdmin
    with pytest.raises(ConfigurationError, match="missing list_jobs, retry_job, worker_status"):
        check_port("store", ports.store, QueueStore)
