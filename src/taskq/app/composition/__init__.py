"""The composition root: the one part of the app that names concrete adapters.

Everything else in ``taskq.app`` talks to ports, or to the functions here.
Its modules are split by what they build: ``migrations`` (the schema),
``worker_ports`` (a worker's ports: given, built on Postgres by
``postgres_ports`` with ``drivers`` and ``redis_limiter``, or made by a
``factory``), ``client_store`` and ``operator`` (the stores of a client and of
the operator commands) and ``embedded`` (a throwaway server for the demo).
Nothing happens at import time.
"""

from __future__ import annotations

from taskq.adapters.postgres.migrator import Migration, MigrationState, MigrationStatus
from taskq.app.composition.client_store import open_store, store_from_pool
from taskq.app.composition.embedded import embedded_postgres_available, open_embedded_postgres
from taskq.app.composition.migrations import (
    JobTablesWouldBeDropped,
    MigrationReport,
    UpgradeReport,
    describe_target,
    drop_schema,
    migrate_down,
    migrate_status,
    migrate_up,
    upgrade_schema,
)
from taskq.app.composition.operator import operator_store
from taskq.app.composition.worker_ports import (
    build_worker_ports,
    memory_worker_ports,
    worker_metrics_registry,
)
from taskq.app.connection_overrides import WORKER_CONNECTIONS_POOL_ROLES
from taskq.app.worker.ports import WorkerPorts

__all__ = [
    "WORKER_CONNECTIONS_POOL_ROLES",
    "JobTablesWouldBeDropped",
    "Migration",
    "MigrationReport",
    "MigrationState",
    "MigrationStatus",
    "UpgradeReport",
    "WorkerPorts",
    "build_worker_ports",
    "describe_target",
    "drop_schema",
    "embedded_postgres_available",
    "memory_worker_ports",
    "migrate_down",
    "migrate_status",
    "migrate_up",
    "open_embedded_postgres",
    "open_store",
    "operator_store",
    "store_from_pool",
    "upgrade_schema",
    "worker_metrics_registry",
]
