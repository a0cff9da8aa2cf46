"""The workgroup file: TOML read with ``tomllib`` into frozen values, every key checked.

An unknown key is refused rather than ignored: a typo such as ``max_concurency`` would
otherwise run the child with the default and nobody would notice. Every refusal is a
``ConfigurationError`` whose message is one line naming the file and the key.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from taskq.app.settings import MAX_CONCURRENCY_LIMIT
from taskq.domain.errors import ConfigurationError


@dataclass(frozen=True, slots=True)
class HealthSpec:
    """``[workers.health]``: kill a child whose ``workers.last_seen_at`` stopped moving."""

    enabled: bool = False
    check_interval: float = 15.0
    stale_after: float = 60.0


@dataclass(frozen=True, slots=True)
class RestartSpec:
    """``[restart]``: at most ``max_restarts`` restarts of one child within ``window`` s."""

    max_restarts: int = 5
    window: float = 60.0
    delay: float = 1.0


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """One ``[[workers]]`` entry with ``[defaults]`` applied."""

    name: str
    actors: str
    queues: tuple[str, ...] | None
    max_concurrency: int | None
    poll_interval: float | None
    health: HealthSpec


@dataclass(frozen=True, slots=True)
class WorkgroupConfig:
    workers: tuple[WorkerSpec, ...]
    restart: RestartSpec


_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
_TOP = frozenset({"actors", "defaults", "restart", "workers"})
_WORKER = frozenset({"name", "actors", "queues", "max_concurrency", "poll_interval", "health"})
_DEFAULTS = _WORKER - {"name"}
_HEALTH = frozenset({"enabled", "check_interval", "stale_after"})
_RESTART = frozenset({"max_restarts", "window", "delay"})


def load_config(path: Path) -> WorkgroupConfig:
    """The workgroup ``path`` describes; ``ConfigurationError`` (one line) when it cannot."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"{path}: not valid TOML: {exc}") from None
    return parse_config(raw, where=str(path))


def parse_config(raw: Mapping[str, Any], *, where: str) -> WorkgroupConfig:
    """The workgroup ``raw`` (a parsed TOML document) describes."""
    _known(raw, _TOP, where)
    defaults = _table(raw.get("defaults", {}), f"{where}: defaults")
    _known(defaults, _DEFAULTS, f"{where}: defaults")
    entries = raw.get("workers")
    if not isinstance(entries, list) or not entries:
        raise ConfigurationError(f"{where}: needs at least one [[workers]] entry")
    workers = []
    for index, entry in enumerate(entries):
        at = f"{where}: workers[{index}]"
        entry = _table(entry, at)
        _known(entry, _WORKER, at)
        workers.append(_worker(entry, defaults, raw.get("actors"), at))
    names = [w.name for w in workers]
    for name in names:
        if names.count(name) > 1:
            raise ConfigurationError(f"{where}: two workers are named {name!r}")
    return WorkgroupConfig(tuple(workers), _restart(raw.get("restart", {}), f"{where}: restart"))


def _worker(
    entry: Mapping[str, Any], defaults: Mapping[str, Any], actors: Any, at: str
) -> WorkerSpec:
    def pick(key: str) -> Any:
        return entry.get(key, defaults.get(key))

    name = _text(entry.get("name"), f"{at}.name")
    if not _NAME.fullmatch(name):
        # It names the child's health socket file too, so no "/" or spaces.
        raise ConfigurationError(f"{at}.name: {name!r}: use letters, digits, '_', '-' and '.'")
    at = f"{at} ({name})"
    queues = pick("queues")
    if queues is not None:
        if not isinstance(queues, list) or not queues:
            raise ConfigurationError(f"{at}.queues: expected a non-empty list of queue names")
        queues = tuple(_text(q, f"{at}.queues") for q in queues)
    concurrency = pick("max_concurrency")
    if concurrency is not None:
        concurrency = _int(concurrency, f"{at}.max_concurrency", 1, MAX_CONCURRENCY_LIMIT)
    poll = pick("poll_interval")
    if poll is not None:
        poll = _seconds(poll, f"{at}.poll_interval")
    health_raw = {**_table(defaults.get("health", {}), f"{at}.health")}
    health_raw.update(_table(entry.get("health", {}), f"{at}.health"))
    return WorkerSpec(
        name=name,
        actors=_text(pick("actors") if pick("actors") is not None else actors, f"{at}.actors"),
        queues=queues,
        max_concurrency=concurrency,
        poll_interval=poll,
        health=_health(health_raw, f"{at}.health"),
    )


def _health(raw: Mapping[str, Any], at: str) -> HealthSpec:
    _known(raw, _HEALTH, at)
    base = HealthSpec()
    enabled = raw.get("enabled", base.enabled)
    if not isinstance(enabled, bool):
        raise ConfigurationError(f"{at}.enabled: expected true or false")
    interval = _seconds(raw.get("check_interval", base.check_interval), f"{at}.check_interval")
    stale = _seconds(raw.get("stale_after", base.stale_after), f"{at}.stale_after")
    if stale <= interval:
        raise ConfigurationError(
            f"{at}: stale_after ({stale:g}) must be greater than check_interval ({interval:g})"
        )
    return HealthSpec(enabled, interval, stale)


def _restart(value: Any, at: str) -> RestartSpec:
    raw = _table(value, at)
    _known(raw, _RESTART, at)
    base = RestartSpec()
    delay = raw.get("delay", base.delay)
    if isinstance(delay, bool) or not isinstance(delay, int | float) or delay < 0:
        raise ConfigurationError(f"{at}.delay: expected a number of seconds >= 0")
    return RestartSpec(
        max_restarts=_int(
            raw.get("max_restarts", base.max_restarts), f"{at}.max_restarts", 0, 1000
        ),
        window=_seconds(raw.get("window", base.window), f"{at}.window"),
        delay=float(delay),
    )


def _known(raw: Mapping[str, Any], allowed: frozenset[str], at: str) -> None:
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ConfigurationError(
            f"{at}: unknown key {unknown[0]!r} (known: {', '.join(sorted(allowed))})"
        )


def _table(value: Any, at: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"{at}: expected a table")
    return value


def _text(value: Any, at: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"{at}: expected a non-empty string")
    return value.strip()


def _int(value: Any, at: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigurationError(f"{at}: expected an integer from {low} to {high}")
    return value


def _seconds(value: Any, at: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigurationError(f"{at}: expected a number of seconds > 0")
    return float(value)
