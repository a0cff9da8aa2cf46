"""Actor registries: what ``taskq worker --actors module:attr`` loads.

A registry is a ``Mapping[str, ActorRef]`` keyed by the actors' names or a
list/tuple of them (:func:`registry_from`); :func:`load_registry` imports one
from ``module:attr``, every failure a :class:`RegistryError` naming the spec.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from collections.abc import Iterator, Mapping
from typing import Any, Final

from taskq.app.actors.ref import ActorRef
from taskq.domain.errors import RegistryError


def _check_member(value: object, where: str) -> ActorRef[Any, Any]:
    if not isinstance(value, ActorRef):
        raise RegistryError(f"{where} is a {type(value).__name__}, not an ActorRef (use @actor)")
    return value


def registry_from(obj: object) -> dict[str, ActorRef[Any, Any]]:
    """The ``{name: ActorRef}`` registry described by ``obj``.

    ``obj`` is a ``Mapping[str, ActorRef]`` whose keys equal the actors'
    names, or a list/tuple of ``ActorRef``. Anything else raises
    :class:`RegistryError`: in particular a generator or iterator (it can be
    read only once, so a second pass would silently see no actors) and a set
    (no stable order). Duplicate names are refused too.
    """
    if isinstance(obj, ActorRef):
        raise RegistryError(
            f"the registry is a single actor ({obj.name!r}); wrap it in a list: [{obj.name}]"
        )
    if isinstance(obj, Mapping):
        registry: dict[str, ActorRef[Any, Any]] = {}
        for key, value in obj.items():
            ref = _check_member(value, f"registry entry {key!r}")
            if key != ref.name:
                raise RegistryError(
                    f"registry key {key!r} does not match the actor's name {ref.name!r}"
                )
            registry[key] = ref
        return registry
    if isinstance(obj, list | tuple):
        registry = {}
        for index, value in enumerate(obj):
            ref = _check_member(value, f"registry item {index}")
            if ref.name in registry:
                raise RegistryError(f"two actors in the registry are named {ref.name!r}")
            registry[ref.name] = ref
        return registry
    if isinstance(obj, Iterator):
        raise RegistryError(
            f"the registry is a one-shot {type(obj).__name__}; it would be exhausted after "
            "one pass and leave the worker with no actors: use a list, a tuple or a Mapping"
        )
    if isinstance(obj, set | frozenset):
        raise RegistryError("the registry is a set; use a list, a tuple or a Mapping")
    raise RegistryError(
        f"the registry must be a Mapping[str, ActorRef] or a list/tuple of ActorRef, "
        f"got {type(obj).__name__}"
    )


#: TaskQ's own source: an error its ``@actor`` raises is placed at the application's line.
_TASKQ_DIR: Final = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _raised_at(exc: BaseException) -> str:
    """`` (at path:line)`` of the innermost frame of the application's code that raised
    ``exc`` (the import machinery's and TaskQ's own frames skipped), or "" when there is
    none."""
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if "importlib" not in frame.filename
        and not frame.filename.startswith("<")
        and not os.path.abspath(frame.filename).startswith(_TASKQ_DIR + os.sep)
    ]
    if not frames:
        return ""
    return f" (at {frames[-1].filename}:{frames[-1].lineno})"


def _searched(module_name: str, exc: ModuleNotFoundError, app_dir: str | None) -> str:
    # Only when the registry's own module (or a parent package) is missing, not a
    # dependency it imports: then name where it was looked for and how to point elsewhere.
    missing = exc.name or ""
    if not missing or not (module_name == missing or module_name.startswith(missing + ".")):
        return ""
    parent, dot, leaf = missing.rpartition(".")
    found = sys.modules.get(parent) if dot else None
    if found is not None:
        # The package imported, so the working directory is right: the module name is not.
        places = getattr(found, "__path__", None)
        if not places:
            return ""  # Python's own message says "'myapp.actors' is not a package"
        return f"; the package {parent!r} (in {', '.join(places)}) has no module {leaf!r}"
    where = [entry or os.getcwd() for entry in sys.path if not entry.endswith(".zip")]
    hint = (
        f"; run from the directory that holds {missing.split('.')[0]!r} or pass --app-dir DIR"
        if app_dir is not None
        else ""
    )
    return f" (searched: {', '.join(where)}){hint}"


def load_registry(
    spec: str, app_dir: str | os.PathLike[str] | None = None
) -> dict[str, ActorRef[Any, Any]]:
    """Import ``"package.module:attr"`` (``attr`` may be dotted) and read its registry.

    ``app_dir`` (``taskq`` passes its ``--app-dir``, default the working
    directory) is put first on ``sys.path`` before the import, as uvicorn's
    ``--app-dir`` is. Every failure, including an error raised while importing
    the module, is a :class:`RegistryError` naming ``spec``; a module not found
    names the directories searched.
    """
    module_name, sep, attr_path = spec.partition(":")
    if module_name.endswith(".py") or "/" in module_name or "\\" in module_name:
        # A path is the likeliest first try; the dotted name it stands for, when relative.
        path = module_name.removesuffix(".py").replace("\\", "/")
        dotted = "package.module" if path.startswith("/") else path.strip("./").replace("/", ".")
        raise RegistryError(
            f"actor registry {spec!r} names a file: give the module's dotted name, as in "
            f"'{dotted}:{attr_path or 'registry'}', from the directory that holds "
            f"{dotted.split('.')[0]!r} (or pass --app-dir DIR)"
        )
    if not sep or not module_name or not attr_path:
        raise RegistryError(
            f"actor registry {spec!r} must look like 'package.module:attribute' (a colon "
            "before the attribute, as in 'myapp.actors:registry')"
        )
    shown_dir: str | None = None
    if app_dir is not None:
        shown_dir = os.path.abspath(app_dir)
        if not os.path.isdir(shown_dir):
            raise RegistryError(
                f"actor registry {spec!r}: --app-dir {shown_dir} is not a directory"
            )
        if shown_dir not in sys.path:
            sys.path.insert(0, shown_dir)
    try:
        target: object = importlib.import_module(module_name)
    except (SystemExit, KeyboardInterrupt) as exc:
        # e.g. argparse run at import: without this the worker would exit 0, silently.
        raise RegistryError(
            f"actor registry {spec!r}: importing {module_name!r} called sys.exit"
            f"({exc.code!r}){_raised_at(exc)}: a module the worker imports must not exit"
            if isinstance(exc, SystemExit)
            else f"actor registry {spec!r}: importing {module_name!r} raised "
            f"KeyboardInterrupt{_raised_at(exc)}"
        ) from exc
    except ModuleNotFoundError as exc:
        raise RegistryError(
            f"actor registry {spec!r}: cannot import {module_name!r}: "
            f"{type(exc).__name__}: {exc}{_raised_at(exc)}"
            f"{_searched(module_name, exc, shown_dir)}"
        ) from exc
    except Exception as exc:
        raise RegistryError(
            f"actor registry {spec!r}: cannot import {module_name!r}: "
            f"{type(exc).__name__}: {exc}{_raised_at(exc)}"
        ) from exc
    for part in attr_path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError as exc:
            raise RegistryError(f"actor registry {spec!r}: no attribute {part!r}") from exc
    try:
        return registry_from(target)
    except RegistryError as exc:
        raise RegistryError(f"actor registry {spec!r}: {exc}") from exc


__all__ = ["load_registry", "registry_from"]
