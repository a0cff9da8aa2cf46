"""Start-up check that an object given as a port has the port's methods.

The port Protocols are not runtime-checkable (``isinstance`` on them is not
allowed), so the check compares names, and for each method whether it takes
the arguments the port passes: a custom adapter missing a method, or keeping
an older signature of one, is refused at once, naming what is wrong, instead
of crashing a loop later.
"""

from __future__ import annotations

import inspect
from typing import Any, Generic, Protocol

from taskq.domain.errors import ConfigurationError
from taskq.ports.clock import Clock
from taskq.ports.leader_lock import LeaderLock
from taskq.ports.notifier import Notifier
from taskq.ports.queue_store import WorkerStore
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


def mismatched_methods(port: object, protocol: type) -> list[str]:
    """Methods of ``port`` that cannot be called the way ``protocol`` declares them: each
    as ``name(what it does not take)``. Methods whose signature cannot be read pass."""
    mismatched = []
    for name, is_method in sorted(protocol_members(protocol).items()):
        declared = _declared(protocol, name) if is_method else None
        implemented = getattr(port, name, None)
        if declared is None or not callable(implemented):
            continue
        try:
            signature = inspect.signature(implemented)
        except (TypeError, ValueError):
            continue
        refused = _refused(signature, declared)
        if refused:
            mismatched.append(f"{name}({refused})")
    return mismatched


def _declared(protocol: type, name: str) -> inspect.Signature | None:
    for cls in protocol.__mro__:
        function = vars(cls).get(name)
        if function is not None and callable(function):
            try:
                return inspect.signature(function)
            except (TypeError, ValueError):
                return None
    return None


def _refused(signature: inspect.Signature, declared: inspect.Signature) -> str:
    """What of the declared call ``signature`` does not take ('' when it takes it all)."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for parameter in list(declared.parameters.values())[1:]:  # past self
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if parameter.kind is parameter.KEYWORD_ONLY:
            kwargs[parameter.name] = None
        else:
            args.append(None)
    try:
        signature.bind(*args, **kwargs)
    except TypeError:
        pass
    else:
        return ""
    names = [p.name for p in list(declared.parameters.values())[1:]]
    return "takes " + ", ".join(names) if names else "takes no arguments"


def check_port(role: str, port: object, protocol: type) -> None:
    """Raise ``ConfigurationError`` naming ``role`` and what it lacks, if anything."""
    missing = missing_members(port, protocol)
    if missing:
        raise ConfigurationError(
            f"the {role} ({type(port).__name__}) does not implement {protocol.__name__}: "
            f"missing {', '.join(missing)}"
        )
    mismatched = mismatched_methods(port, protocol)
    if mismatched:
        raise ConfigurationError(
            f"the {role} ({type(port).__name__}) does not implement {protocol.__name__}: "
            f"these methods do not take the arguments the port passes (an older "
            f"signature?): {'; '.join(mismatched)}"
        )


def _roles() -> dict[str, type]:
    return {
        "store": WorkerStore,
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
