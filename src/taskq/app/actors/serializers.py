"""How an actor's payloads and results become the JSON a store keeps.

Dumps go through a serializer built once per actor from the DECLARED type
(an instance of a subclass keeps none of its extra fields), by field name (the
worker validates by name, so an aliased field round-trips), and with NaN and
infinity left as floats wherever they are (pydantic would write ``null`` for
one in an ``Any``, ``dict`` or ``list`` field): the store's encoder then
refuses them, named, and nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pydantic_core import CoreSchema, SchemaSerializer

_CONFIG: Any = {"ser_json_inf_nan": "constants"}
# pydantic's serializers of SecretStr, SecretBytes and Secret[...]: they write '**********'.
_SECRET_SERIALIZERS = frozenset({"_serialize_secret_field", "_serialize_secret"})


def json_serializer(schema: CoreSchema) -> SchemaSerializer:
    """A serializer for ``schema`` that keeps NaN and infinity as floats in JSON mode."""
    return SchemaSerializer(schema, _CONFIG)


def find_secret(schema: object) -> str | None:
    """The field path of the first pydantic secret in core ``schema``
    (``'token'``, ``'inner.keys'``), ``'the value'`` for a bare one, or None."""
    return next(_secrets(schema, (), set()), None)


def _secrets(node: object, path: tuple[str, ...], seen: set[int]) -> Iterator[str]:
    if isinstance(node, list | tuple):
        for item in node:
            yield from _secrets(item, path, seen)
        return
    if not isinstance(node, Mapping) or id(node) in seen:
        return
    seen.add(id(node))
    serialization = node.get("serialization")
    if isinstance(serialization, Mapping):
        function = serialization.get("function")
        if getattr(function, "__module__", "") == "pydantic.types" and (
            getattr(function, "__name__", "") in _SECRET_SERIALIZERS
        ):
            yield ".".join(path) or "the value"
            return
    for key, value in node.items():
        if key == "fields" and isinstance(value, Mapping):
            for name, field in value.items():
                yield from _secrets(field, (*path, str(name)), seen)
        elif key not in ("metadata", "serialization", "cls"):
            yield from _secrets(value, path, seen)


def find_bad_bytes(value: object, path: str) -> str | None:
    """Where in ``value`` (a python-mode dump) a ``bytes`` value is not UTF-8, or None."""
    if isinstance(value, bytes | bytearray):
        try:
            bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return path
        return None
    if isinstance(value, Mapping):
        items: Any = ((f"{path}[{key!r}]", item) for key, item in value.items())
    elif isinstance(value, list | tuple | set | frozenset):
        items = ((f"{path}[{index}]", item) for index, item in enumerate(value))
    else:
        return None
    return next(filter(None, (find_bad_bytes(item, where) for where, item in items)), None)


def dump_problem(exc: ValueError, dump_python: Any, root: str = "payload") -> str:
    """Why a value could not be dumped to JSON, in words that name the place where
    they can. ``dump_python()`` dumps it in python mode (only called here, on failure)."""
    if isinstance(exc, UnicodeDecodeError):
        try:
            where = find_bad_bytes(dump_python(), root)
        except (ValueError, RecursionError):
            where = None
        return (
            f"{where or 'a bytes value'} is not UTF-8 text, which is how JSON keeps bytes "
            "(encode binary data yourself, for example as base64 in a str field)"
        )
    if "depth" in str(exc):
        return f"it is nested deeper than JSON serialization allows ({exc})"
    return f"{type(exc).__name__}: {exc}"


__all__ = ["dump_problem", "find_bad_bytes", "find_secret", "json_serializer"]
