"""Server-side TCP keepalives for a session whose death must be noticed by the server.

A session advisory lock lives as long as the server believes its session does.
When the network to the holder is cut silently (packets dropped, nothing
closed), an idle session sends nothing, so the server notices only when the
kernel's TCP keepalive gives up: two hours and more with the usual defaults.
Meanwhile no other worker can take the lock. Setting the session's own
keepalives (and, from Postgres 12, ``tcp_user_timeout`` for data the server
sent and never saw acknowledged) makes the server end it within
``dead_after`` seconds of the last packet it heard from the peer.

The settings only apply to TCP connections; over a Unix socket Postgres
accepts and ignores them.
"""

from __future__ import annotations

from typing import Final

#: Unanswered probes before the server gives the session up.
PROBES: Final = 3
#: The first server version (server_version_num) with tcp_user_timeout.
TCP_USER_TIMEOUT_SINCE: Final = 120000


def keepalive_setup(dead_after: float, server_version_num: int) -> list[str]:
    """The ``SET`` statements that make the server drop a silent peer within ``dead_after`` s.

    :data:`PROBES` probes spread over about half of it, after an idle time that
    takes the rest (whole seconds, at least one each: the settings are
    integers), so ``idle + PROBES × interval <= dead_after`` for any
    ``dead_after >= 1 + PROBES``; a shorter one gets that much.
    """
    interval = max(1, int(dead_after / (2 * PROBES)))
    idle = max(1, int(dead_after) - PROBES * interval)
    setup = [
        f"SET tcp_keepalives_idle = {idle}",
        f"SET tcp_keepalives_interval = {interval}",
        f"SET tcp_keepalives_count = {PROBES}",
    ]
    if server_version_num >= TCP_USER_TIMEOUT_SINCE:
        # In milliseconds; bounds retransmissions of an answer the peer never acknowledged
        # (keepalives are not sent while data is outstanding).
        setup.append(f"SET tcp_user_timeout = {max(1000, int(dead_after * 1000))}")
    return setup


__all__ = ["PROBES", "TCP_USER_TIMEOUT_SINCE", "keepalive_setup"]
