"""Worker ports from a ``TASKQ_DRIVER=package.module:factory`` adapter factory."""

from __future__ import annotations

import importlib
import inspect

from taskq.app.settings import WorkerSettings, redact_url
from taskq.app.worker.ports import WorkerPorts
from taskq.domain.errors import ConfigurationError, TaskQError


def _described(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r})"
    return redact_url(f"{type(exc).__name__}: {exc}")  # an echoed DSN keeps no password


async def factory_worker_ports(settings: WorkerSettings) -> WorkerPorts:
    """Import ``TASKQ_DRIVER``'s factory and call (or await) it with ``settings``.

    Every way it can fail (import, signature, its own error, a wrong product)
    is one ``ConfigurationError`` naming the driver; a ``TaskQError`` passes as it is.
    """
    spec = settings.driver
    module_name, _, attr = spec.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"TASKQ_DRIVER={spec}: cannot load the factory: {exc}") from exc
    except (Exception, SystemExit) as exc:  # the module failed on import (SyntaxError too)
        raise ConfigurationError(
            f"TASKQ_DRIVER={spec}: importing {module_name} failed: {_described(exc)}"
        ) from exc
    if not callable(factory):
        raise ConfigurationError(f"TASKQ_DRIVER={spec}: {attr} is not callable")
    try:
        product = factory(settings)
        if inspect.isawaitable(product):
            product = await product
    except TaskQError:
        raise
    except (Exception, SystemExit) as exc:  # wrong signature, or the factory raised
        raise ConfigurationError(
            f"TASKQ_DRIVER={spec}: the factory failed: {_described(exc)}"
        ) from exc
    if not isinstance(product, WorkerPorts):
        raise ConfigurationError(
            f"TASKQ_DRIVER={spec}: the factory returned {type(product).__name__}, "
            "not taskq.app.worker.ports.WorkerPorts"
        )
    return product
