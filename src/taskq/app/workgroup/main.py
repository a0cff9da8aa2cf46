"""``taskq workgroup start``'s body: check the database, then supervise until done."""

from __future__ import annotations

from collections.abc import Mapping

from taskq.app import composition
from taskq.app.settings import WorkerSettings
from taskq.app.workgroup.config import WorkgroupConfig
from taskq.app.workgroup.instance import new_instance_id
from taskq.app.workgroup.supervisor import Supervisor, say

#: Beyond the worker's own termination grace: interpreter exit, a last log flush.
GRACE_MARGIN = 5.0


async def run_workgroup(
    config: WorkgroupConfig, settings: WorkerSettings, base_env: Mapping[str, str]
) -> int:
    """Supervise ``config``'s children; the supervisor's exit code.

    The store is opened (and pinged) first, so an unreachable database is the
    supervisor's one-line refusal rather than every child's crash loop; it stays open
    for the health checks. ``StoreUnavailable``/``ConfigurationError`` propagate.
    """
    async with composition.operator_store(settings) as store:
        await store.ping()
        instance = new_instance_id()
        say(f"instance {instance}: {len(config.workers)} worker(s)")
        supervisor = Supervisor(
            config,
            base_env=base_env,
            instance=instance,
            registry=store,
            grace=settings.termination_grace_period + GRACE_MARGIN,
            health_socket=settings.health_socket_path,
        )
        return await supervisor.run()
