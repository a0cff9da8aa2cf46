"""The CLI tests run ``taskq`` in-process (``main``) on a memory backend they can fill."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
from tests.unit.app.cli import memory_driver

from taskq.adapters.memory import FakeClock, MemoryBackend
from taskq.app.cli import main
from taskq.ports.queue_store import QueueStore

T = TypeVar("T")


def _in_thread(call: Callable[[], T]) -> T:
    """``call()`` on a thread of its own: the command's ``asyncio.run`` then sets and clears
    that thread's event loop, not the one pytest-asyncio keeps on the test's thread."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(call).result()


@dataclass
class Cli:
    """Runs ``taskq`` commands and prepares the backend they see."""

    backend: MemoryBackend
    capsys: pytest.CaptureFixture[str]

    def on_store(self, work: Callable[[QueueStore], Awaitable[T]]) -> T:
        """Run ``work`` on a store of the backend (what an application or worker did)."""

        async def run() -> T:
            return await work(self.backend.store())

        return _in_thread(lambda: asyncio.run(run()))

    def __call__(self, *args: str) -> tuple[int, str, str]:
        """``taskq ARGS``: exit code, stdout, stderr."""
        self.capsys.readouterr()
        with pytest.raises(SystemExit) as stop:
            _in_thread(lambda: main(list(args)))
        out, err = self.capsys.readouterr()
        return int(stop.value.code or 0), out, err


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Cli:
    """``taskq`` on a fresh memory backend through TASKQ_DRIVER, with no other TASKQ_*
    variable and no .env (the working directory is empty)."""
    for name in [n for n in os.environ if n.startswith("TASKQ_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("TASKQ_DRIVER", f"{memory_driver.__name__}:ports")
    monkeypatch.chdir(tmp_path)
    backend = MemoryBackend(clock=FakeClock())
    monkeypatch.setattr(memory_driver, "BACKEND", backend)
    return Cli(backend, capsys)
