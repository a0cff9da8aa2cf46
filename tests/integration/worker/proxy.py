"""A TCP proxy in the test's event loop that can fail the way networks do.

``blackhole()`` is a silent partition: every byte is held, nothing is closed,
new connections are accepted and never answered. ``refuse()`` is an outage:
every connection is cut and new ones are refused (the port stops listening).

``vanish()`` is a silent partition the server cannot see either. Under
``blackhole()`` the proxy's own sockets still answer the server's TCP
keepalive probes (the kernel does, whatever the proxy forwards), so the server
would believe its peer alive for ever. ``vanish()`` also closes every upstream
socket without a FIN or a reset (``TCP_REPAIR``, which needs CAP_NET_ADMIN:
see :func:`can_vanish`): the server learns its peer is gone only if it sends
something, as on a real partition (where its probes go unanswered, here they
draw a reset).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit, urlunsplit

#: linux/tcp.h: a socket in repair mode closes without telling its peer.
TCP_REPAIR = 19


def can_vanish() -> bool:
    """Whether this process may put a socket in repair mode (``vanish()`` needs it)."""
    with socket.socket() as probe:
        try:
            probe.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR, 1)
        except OSError:
            return False
    return True


class FaultyProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self._upstream = (upstream_host, upstream_port)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._upstreams: set[asyncio.StreamWriter] = set()
        self._held = asyncio.Event()
        self._gate = asyncio.Event()
        self._gate.set()
        #: Connections accepted so far (held at the gate or not).
        self.accepted = 0
        self.port = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def dsn_for(self, dsn: str) -> str:
        """``dsn`` with its host and port replaced by the proxy's."""
        parts = urlsplit(dsn)
        netloc = parts.netloc.rsplit("@", 1)
        auth = f"{netloc[0]}@" if len(netloc) == 2 else ""
        return urlunsplit(parts._replace(netloc=f"{auth}127.0.0.1:{self.port}"))

    def hold_new(self) -> None:
        """A server slow to answer: new connections are accepted and wait (nothing is
        sent on) until :meth:`release_new`, then go through as usual."""
        self._gate.clear()

    def release_new(self) -> None:
        self._gate.set()

    def blackhole(self) -> None:
        self._held.set()

    def vanish(self) -> None:
        self.blackhole()
        for up in self._upstreams:
            if not up.transport.is_closing():  # a session that ended before the cut
                up.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, TCP_REPAIR, 1)
                up.transport.abort()

    @property
    def upstream_ports(self) -> list[int]:
        """The local ports of the proxy's connections to the server (its ``client_port``s)."""
        return [int(up.get_extra_info("sockname")[1]) for up in self._upstreams]

    def refuse(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in self._writers:
            writer.transport.abort()

    async def restore(self) -> None:
        """The network is back: new connections pass through again, on the same port
        (connections held by ``blackhole()`` stay held; clients time them out)."""
        self._held = asyncio.Event()
        if self._server is None or not self._server.is_serving():
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)

    async def close(self) -> None:
        self.refuse()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        self.accepted += 1
        try:
            await self._gate.wait()
            if self._held.is_set():
                await asyncio.Event().wait()  # accepted, never answered
            up_reader, up_writer = await asyncio.open_connection(*self._upstream)
            self._writers.add(up_writer)
            self._upstreams.add(up_writer)
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            self._tasks.discard(task)
            for w in (writer,):
                w.transport.abort()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                if self._held.is_set():
                    await asyncio.Event().wait()  # hold it: a silent partition
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            task = asyncio.current_task()
            if self._held.is_set() and task is not None and not task.cancelling():
                await asyncio.Event().wait()  # partitioned: the other side hears nothing
            with contextlib.suppress(Exception):
                writer.transport.abort()


@asynccontextmanager
async def faulty_proxy(dsn: str) -> AsyncIterator[FaultyProxy]:
    parts = urlsplit(dsn)
    proxy = FaultyProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.close()
