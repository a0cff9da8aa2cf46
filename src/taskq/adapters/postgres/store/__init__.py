"""The driver-independent Postgres store: every QueueStore rule, written once.

Each role of the port lives in its own module and runs named queries from
``taskq/adapters/postgres/queries`` through a
:class:`~taskq.adapters.postgres.driver.Driver`; the asyncpg and psycopg
adapters only supply the driver (connections, binding, error translation)
and the pool factory for :class:`PooledQueueStore`.
"""

from taskq.adapters.postgres.store.base import LockBudgets
from taskq.adapters.postgres.store.bound_enqueue import BoundEnqueuer
from taskq.adapters.postgres.store.enqueue import Enqueuer
from taskq.adapters.postgres.store.pooled import PooledQueueStore
from taskq.adapters.postgres.store.queue_store import POSTGRES_CAPABILITIES, PostgresQueueStore

__all__ = [
    "POSTGRES_CAPABILITIES",
    "BoundEnqueuer",
    "Enqueuer",
    "LockBudgets",
    "PooledQueueStore",
    "PostgresQueueStore",
]
