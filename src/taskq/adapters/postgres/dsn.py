"""Where a DSN points, for messages: host and port, never the credentials."""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import parse_qs, urlsplit

DEFAULT_PORT: Final = "5432"
_KEYWORD = re.compile(r"(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|\S+)")


def dsn_location(dsn: str) -> str:
    """``host:port`` of a URL or ``key=value`` DSN, e.g. ``127.0.0.1:5432``.

    Unix-socket DSNs give the socket directory as host. User and password
    never appear in the result, so it is safe to print.
    """
    if "://" in dsn:
        parts = urlsplit(dsn)
        query = parse_qs(parts.query)
        netloc = parts.netloc.rpartition("@")[2]
        host = query.get("host", [""])[0] or netloc or "localhost"
        if host == netloc and ("," in netloc or re.search(r":[0-9]+$", netloc)):
            return netloc  # already host:port (or a multi-host list)
        port = query.get("port", [""])[0] or DEFAULT_PORT
        return f"{host}:{port}"
    params = {k: v.strip("'") for k, v in _KEYWORD.findall(dsn)}
    return f"{params.get('host', 'localhost')}:{params.get('port', DEFAULT_PORT)}"


__all__ = ["DEFAULT_PORT", "dsn_location"]
