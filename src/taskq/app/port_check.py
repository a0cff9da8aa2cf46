"""Start-up check that an object given as a port has the port's methods.

The port Protocols are not runtime-checkable (``isinstance`` on them is not
allowed), so the check compares names: a custom adapter missing a method is
refused at once, naming what it lacks, instead of crashing a loop later.
"""

from __future__ import annotations

from typing import Generic, Protocol

from taskq.domain.errors import ConfigurationError
from taskq.ports.clock import Clock
from taskq.ports.leader_lock import LeaderLock
from taskq.ports.notifier import Notifier
from taskq.ports.queue_store import QueueStore
from taskq.ports.rate_limiter import RateLimiter


def protocol_members(protocol: type) -> dict[str, bool]:
    """The public members ``protocol`` declares (its bases too): name -> is it a method."""
    members: dict[str, bool] = {}
    for cls in protocol.__mro__:
        if cls in (object, Protocol, Generic):
            continue
        for name, value in vars(cls).items():
            if not name.startswith("_"):
                members.setdefault(name, not isinstance(value, property))
    return members


def missing_members(port: object, protocol: type) -> list[str]:
    """The members of ``protocol`` that ``port`` lacks (a method must be callable)."""
    missing = []
    for name, is_method in sorted(protocol_members(protocol).items()):
        try:
            value = getattr(port, name)
        except AttributeError:
            missing.append(name)
            continue
        except Exception:  # a property whose getter fails still exists
            continue
        if is_method and not callable(value):
            missing.append(name)
    return missing


def check_port(role: str, port: object, protocol: type) -> None:
    """Raise ``ConfigurationError`` naming ``role`` and what it lacks, if anything."""
    missing = missing_members(port, protocol)
    if missing:
        raise ConfigurationError(
            f"the {role} ({type(port).__name__}) does not implement {protocol.__name__}: "
            f"missing {', '.join(missing)}"
        )


def _roles() -> dict[str, type]:
    return {
        "store": QueueStore,
        "leader_lock": LeaderLock,
        "notifier": Notifier,
        "rate_limiter": RateLimiter,
        "clock": Clock,
    }


def check_given_ports(**ports: object) -> None:
    """Check each port given by role name (``store=``, ``leader_lock=``, ...); None is skipped."""
    roles = _roles()
    for role, port in ports.items():
        if port is not None:
            check_port(role, port, roles[role])


def check_worker_ports(ports: object) -> None:
    """Check every port of a ``WorkerPorts`` (one a factory returned, say)."""
    check_given_ports(**{role: getattr(ports, role) for role in _roles()})


def check_methods(what: str, port: object, names: tuple[str, ...]) -> None:
    """Raise ``ConfigurationError`` unless ``port`` has a callable for each of ``names``."""
    missing = [name for name in names if not callable(getattr(port, name, None))]
    if missing:
        raise ConfigurationError(
            f"{what} ({type(port).__name__}) lacks the methods a client calls: "
            f"missing {', '.join(missing)}"
        )
