"""Custom adapters (TASKQ_DRIVER=module:factory, or ports passed in) checked at start.

Real worker processes (``taskq worker``) on the flawed factories in custom_ports.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.integration.worker.support import WorkerProcess
from tests.unit.app.worker import custom_ports
from tests.unit.app.worker.harness import make_settings

from taskq.adapters.memory import FakeClock, MemoryBackend
from taskq.app.client import JobsClient
from taskq.app.composition import build_worker_ports
from taskq.domain.errors import ConfigurationError, StoreUnavailable

FACTORIES = "tests.unit.app.worker.custom_ports"
REGISTRY = "tests.unit.app.worker.registries:registry"


def _worker(tmp_path: Path, factory: str, **env: str) -> WorkerProcess:
    env = {
        "TASKQ_DRIVER": factory if ":" in factory else f"{FACTORIES}:{factory}",
        "TASKQ_LOG_FORMAT": "json",
        "TASKQ_HEALTH_ENABLED": "false",
        "TASKQ_IDLE_SETTLE_WINDOW": "0",
        **env,
    }
    args = ["worker", "--actors", REGISTRY, "--until-idle"]
    return WorkerProcess(args, env, tmp_path, factory.replace(":", "_"))


@pytest.mark.parametrize(
    ("factory", "problem"),
    [
        (
            "no_claim",
            "the store (Without) does not implement WorkerStore: missing claim, finish_and_claim",
        ),
        (
            "no_finish_many",
            "the store (Without) does not implement WorkerStore: missing finish_many",
        ),
        (
            # Was: accepted; an until-idle worker then died of a TypeError (exit 1), a leader
            # failed its stranded check every 60 s.
            "old_stranded_read",
            "the store (OldStrandedRead) does not implement WorkerStore: these methods do not "
            "take the arguments the port passes (an older signature?): "
            "stranded_actors(takes queues, stale_after, now)",
        ),
        (
            "lock_is_a_store",
            "the leader_lock (MemoryQueueStore) does not implement LeaderLock: "
            "missing held, probe, try_acquire",
        ),
    ],
)
async def test_a_port_missing_methods_is_refused_before_the_worker_registers(
    tmp_path: Path, factory: str, problem: str
) -> None:
    """Was: worker-started, then a loop crashed with a raw AttributeError (or every job ran
    and every write failed). Now: exit 1 before registering, one line naming port and methods."""
    proc = _worker(tmp_path, factory)
    assert await proc.wait(within=60) == 1, proc.output_tail()
    assert f"taskq: {problem}\n" in proc.stderr()
    assert proc.events("worker-started") == []
    assert "Traceback" not in proc.stderr()


async def test_a_bug_in_a_custom_store_at_start_is_exit_1_naming_the_step(tmp_path: Path) -> None:
    """Was: the KeyError escaped worker_main as a raw traceback. Now: exit 1, one line, and
    the traceback in a worker-start-failed ERROR record."""
    proc = _worker(tmp_path, "buggy_store")
    assert await proc.wait(within=60) == 1, proc.output_tail()
    lines = [line for line in proc.stderr().splitlines() if line.startswith("taskq: ")]
    assert lines == ["taskq: store.sync_actor_configs failed: KeyError: 'audit_table'"]
    (failed,) = proc.events("worker-start-failed")
    assert failed["level"] == "ERROR"
    assert failed["step"] == "store.sync_actor_configs"
    assert "KeyError: 'audit_table'" in failed["exception"]


async def test_redis_url_beside_a_factory_is_named_as_ignored(tmp_path: Path) -> None:
    """TASKQ_REDIS_URL with a factory driver was ignored silently; now one WARNING says so."""
    factory = "taskq.app.composition:memory_worker_ports"
    proc = _worker(tmp_path, factory, TASKQ_REDIS_URL="redis://127.0.0.1:1/0")
    assert await proc.wait(within=60) == 0, proc.output_tail()
    (ignored,) = proc.events("worker-settings-ignored")
    assert ignored["level"] == "WARNING"
    assert ignored["settings"] == ["TASKQ_REDIS_URL"]


async def test_ports_passed_in_are_checked_too(backend: MemoryBackend) -> None:
    """worker_main(store=..., leader_lock=...) gets the same check as factory ports."""
    with pytest.raises(ConfigurationError, match="the notifier \\(MemoryQueueStore\\) does not"):
        await build_worker_ports(
            make_settings(),
            store=backend.store(),
            leader_lock=backend.leader_lock(),
            notifier=backend.store(),  # type: ignore[arg-type]
        )


def test_a_client_store_needs_only_the_methods_the_client_calls(backend: MemoryBackend) -> None:
    """JobsClient(store) refuses a store without enqueue_many or get; others are not needed."""
    with pytest.raises(ConfigurationError, match=r"missing enqueue_many, get$"):
        JobsClient(custom_ports.Without(backend.store(), "enqueue_many", "get"))
    JobsClient(custom_ports.Without(backend.store(), "attempts", "queue_depths"))


async def test_the_factory_clock_is_used_unless_one_is_passed() -> None:
    """The factory's clock was dropped for the system clock; now it is the worker's."""
    settings = make_settings(driver=f"{FACTORIES}:fake_clock_ports")
    ports = await build_worker_ports(settings)
    assert ports.clock is custom_ports.FACTORY_CLOCK
    mine = FakeClock()
    assert (await build_worker_ports(settings, clock=mine)).clock is mine


async def test_a_leader_lock_built_on_an_unreachable_dsn_refuses_the_start(
    backend: MemoryBackend,
) -> None:
    """store= given, leader_lock= not: the lock is built on Postgres. Was: no connection at
    start, leader-task-failed forever. Now: refused, naming the port and the DSN location."""
    settings = make_settings(
        driver="asyncpg", pg_dsn="postgresql://u:p@127.0.0.1:1/db", notify_enabled=False
    )
    with pytest.raises(StoreUnavailable, match=r"no leader_lock= was given.*127\.0\.0\.1:1"):
        await build_worker_ports(settings, store=backend.store())
