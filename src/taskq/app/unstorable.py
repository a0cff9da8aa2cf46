"""Naming what in a job no store can keep, once a store refused it.

A store refuses an unstorable value with a ``ValueError`` in its own words
("Out of range float values are not JSON compliant", or the server's "unsupported
Unicode escape sequence"), which names neither the actor nor the field. The
client looks for the value only then (never on the way in: a walk of every
payload would cost each enqueue) and says where it is.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from taskq.domain.storable import text_problem

_DEPTH_LIMIT = 100


def find_unstorable(value: Any, path: str = "") -> str | None:
    """Where in ``value`` (a JSON-like tree) the first value JSON text cannot hold is,
    as ``path`` plus ``['key'][index]`` and what it is; None when there is none."""
    return next(_unstorable(value, path, 0), None)


def _unstorable(value: Any, path: str, depth: int) -> Iterator[str]:
    if depth > _DEPTH_LIMIT:
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            yield f"{path} is {value!r} (JSON has no NaN or infinity)"
    elif isinstance(value, str):
        problem = text_problem(value)
        if problem:
            yield f"{path} {problem}"
    elif isinstance(value, Mapping):
        for key, item in value.items():
            problem = text_problem(key) if isinstance(key, str) else None
            if problem:
                yield f"{path} has a key that {problem}"
            yield from _unstorable(item, f"{path}[{key!r}]", depth + 1)
    elif isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        for index, item in enumerate(value):
            yield from _unstorable(item, f"{path}[{index}]", depth + 1)


def unstorable_error(
    actor: str, what: str, places: Iterable[tuple[str, Any]], exc: ValueError
) -> ValueError:
    """``exc`` again, naming the actor and, when one of ``places`` (name, value) holds
    it, the value at fault."""
    where = next(filter(None, (find_unstorable(value, name) for name, value in places)), None)
    detail = f"{where}: " if where else ""
    return ValueError(f"actor {actor!r}: the {what} cannot be stored: {detail}{exc}")


__all__ = ["find_unstorable", "unstorable_error"]
