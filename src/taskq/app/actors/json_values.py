"""Checked deep copies of JSON values (actor metadata, enqueue metadata, cron payloads).

A copy, so a caller who changes its dict afterwards changes nothing stored; checked,
so a value JSON cannot hold is refused where it was given, naming its place.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from taskq.domain.job import JSON


def json_copy(value: object, where: str) -> JSON:
    """A deep copy of ``value`` made of JSON types only; ``ValueError`` naming ``where`` if not."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} is {value!r}, which JSON cannot hold")
        return value
    if isinstance(value, Mapping):
        copied: dict[str, JSON] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where} has a non-string key {key!r}")
            copied[key] = json_copy(item, f"{where}[{key!r}]")
        return copied
    if isinstance(value, list | tuple):
        return [json_copy(item, f"{where}[{i}]") for i, item in enumerate(value)]
    raise ValueError(f"{where} holds a {type(value).__name__}, which is not JSON")


__all__ = ["json_copy"]
