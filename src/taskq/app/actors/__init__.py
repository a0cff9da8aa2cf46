"""Actors: the ``@actor`` decorator, the :class:`ActorRef` it returns, and registries.

By responsibility: :mod:`.options` (checking ``@actor``'s options),
:mod:`.signature` (reading the function's signature), :mod:`.ref` (the actor
ref), :mod:`.codec` (payload and result JSON), :mod:`.invoke` (calling the
function), :mod:`.enqueue_options` (the options of an enqueue and the job they
make), :mod:`.decorator` and :mod:`.registry` (loading ``module:attr``).
"""

from taskq.app.actors.decorator import ActorDecorator, actor
from taskq.app.actors.json_values import json_copy
from taskq.app.actors.ref import ActorRef
from taskq.app.actors.registry import load_registry, registry_from

__all__ = [
    "ActorDecorator",
    "ActorRef",
    "actor",
    "json_copy",
    "load_registry",
    "registry_from",
]
