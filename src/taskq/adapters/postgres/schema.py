"""The Postgres schema TaskQ lives in: a validated, always-quoted identifier.

SQL text names the schema as ``{schema}``; only a :class:`Schema` can fill it
in, and a :class:`Schema` exists only for a name that passed
:func:`~taskq.domain.settings_rules.validate_identifier`. So no raw user input
is ever pasted into SQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from taskq.domain.settings_rules import validate_identifier

DEFAULT_SCHEMA_NAME: Final = "taskq"
#: Postgres truncates identifiers (and refuses channel names) longer than this many bytes.
MAX_IDENTIFIER_BYTES: Final = 63


def quote_identifier(name: str) -> str:
    """``name`` as a double-quoted SQL identifier (embedded quotes doubled)."""
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True, slots=True)
class Schema:
    """A validated schema name.

    ``Schema("x; drop")`` raises ``InvalidIdentifierError`` naming
    ``TASKQ_SCHEMA_NAME``, the setting a schema name comes from.
    """

    name: str = DEFAULT_SCHEMA_NAME

    def __post_init__(self) -> None:
        validate_identifier(self.name, what="TASKQ_SCHEMA_NAME")

    @property
    def quoted(self) -> str:
        """The schema as it appears in SQL, e.g. ``"taskq"``."""
        return quote_identifier(self.name)

    def lock_key(self, purpose: str) -> str:
        """Text of an advisory-lock key for ``purpose`` in this schema.

        Hash it in SQL with ``hashtextextended(key, 0)``. The schema is part of
        the key so two deployments in one database never share a lock.
        """
        return f"taskq:{purpose}:{self.name}"

    @property
    def wake_channel(self) -> str:
        """The LISTEN/NOTIFY channel for wake-ups: ``taskq_wake_{schema}``.

        Cut to 63 bytes, as Postgres would cut the identifier in ``LISTEN``;
        ``pg_notify`` refuses longer names, so both sides must use this value.
        """
        return f"taskq_wake_{self.name}"[:MAX_IDENTIFIER_BYTES]


__all__ = ["DEFAULT_SCHEMA_NAME", "MAX_IDENTIFIER_BYTES", "Schema", "quote_identifier"]
