"""Where a DSN points, for messages: host and port, never the credentials."""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import parse_qs, unquote, urlsplit

DEFAULT_PORT: Final = "5432"
_KEYWORD = re.compile(r"(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|\S+)")


def dsn_location(dsn: str) -> str:
    """``host:port`` of a URL or ``key=value`` DSN, e.g. ``127.0.0.1:5432``.

    Unix-socket DSNs give the socket directory as host. User and password
    never appear in the result, so it is safe to print.
    """
    if "://" in dsn:
        try:
            parts = urlsplit(dsn)
        except ValueError:  # e.g. an unclosed [IPv6 bracket: say so without echoing the DSN
            return "an unparseable DSN"
        query = parse_qs(parts.query)
        netloc = parts.netloc.rpartition("@")[2]
        host = query.get("host", [""])[0] or netloc or "localhost"
        if host == netloc and ("," in netloc or re.search(r":[0-9]+$", netloc)):
            return netloc  # already host:port (or a multi-host list)
        port = query.get("port", [""])[0] or DEFAULT_PORT
        return f"{host}:{port}"
    params = {k: v.strip("'") for k, v in _KEYWORD.findall(dsn)}
    return f"{params.get('host', 'localhost')}:{params.get('port', DEFAULT_PORT)}"


_URL_PASSWORD = re.compile(r"://[^:/@?#]*:([^@/?#]*)@")
_PARAM_PASSWORD = re.compile(r"(?i)\bpassword\s*=\s*('(?:[^'\\]|\\.)*'|[^&\s]+)")


def dsn_database(dsn: str) -> str | None:
    """The database a URL or ``key=value`` DSN names, or ``None`` (libpq's default: the user)."""
    if "://" in dsn:
        try:
            parts = urlsplit(dsn)
        except ValueError:
            return None
        name = parse_qs(parts.query).get("dbname", [""])[0] or unquote(parts.path.lstrip("/"))
        return name or None
    return {k: v.strip("'") for k, v in _KEYWORD.findall(dsn)}.get("dbname")


def scrub_password(text: str, dsn: str) -> str:
    """``text`` with the DSN's password (as written or percent-decoded) replaced by ``***``.

    Drivers quote the bad part of a DSN in their errors, which may be the password.
    """
    secrets = [m.group(1) for m in _URL_PASSWORD.finditer(dsn)]
    secrets += [m.group(1).strip("'") for m in _PARAM_PASSWORD.finditer(dsn)]
    # A password that is also the user or database name (taskq:taskq@.../taskq) hides
    # nothing the message may name anyway, and hiding it would blank those names too.
    public = {_dsn_user(dsn), dsn_database(dsn)}
    found = {*secrets, *(unquote(s) for s in secrets)} - {""} - public
    for secret in sorted(found, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def _dsn_user(dsn: str) -> str | None:
    if "://" in dsn:
        match = re.search(r"://([^:/@?#]*)(?::[^@/?#]*)?@", dsn)
        return unquote(match.group(1)) if match else None
    return {k: v.strip("'") for k, v in _KEYWORD.findall(dsn)}.get("user")


__all__ = ["DEFAULT_PORT", "dsn_database", "dsn_location", "scrub_password"]
