"""Actor dependencies: scopes, registration, and the worker's scope chain.

An actor declares what it needs as ``Annotated[T, Scope.X]`` parameters; the
application registers how to make each ``(T, scope)`` on a
:class:`Dependencies`; the worker opens the scope chain once and resolves an
actor's parameters per job::

    worker start ─▶ PROCESS ─▶ THREAD ─▶ LOOP ─┐         (opened in this order)
                                               │ per job: actor_scope(ref)
                                               │   TRANSIENT created, then torn down
    worker exit  ◀─ PROCESS ◀─ THREAD ◀─ LOOP ◀┘         (closed in reverse)

Lifetimes:

- ``PROCESS``: one instance per worker process, created when the chain opens.
- ``THREAD``: one instance per OS thread, created on first use in that thread.
  Sync actors run in worker threads, so they get their thread's instance; an
  async actor gets the event-loop thread's. Factories must be synchronous.
- ``LOOP``: one instance per event loop, created on the loop that opens the
  chain; resolving it from another loop is an error (loop-bound objects such
  as driver connections break there).
- ``TRANSIENT``: a new instance per job, torn down when the job's
  ``actor_scope`` exits, whatever the outcome (return, error, cancellation).

A factory takes no arguments and may return the instance, an awaitable of it,
or a context manager (sync or async), or be a (async) generator function. A
context manager is entered and the value of its ``__enter__``/``__aenter__``
is what actors receive; its exit (or the code after the generator's ``yield``)
is the teardown, run at scope close in reverse creation order. Teardown does
not see the job's exception. A failing teardown is logged
(``di-teardown-failed``) and never raised: it cannot change a job's outcome
nor stop the other teardowns.

Instance lifecycles are dependency-injector providers: ``Resource`` for
PROCESS, LOOP and TRANSIENT, ``ThreadLocalSingleton`` for THREAD, held in one
``DynamicContainer`` per long-lived scope.

The modules: ``spec`` (what is declared and registered), ``registry``
(:class:`Dependencies`), ``scopes`` (the containers) and ``chain`` (the
worker's open chain and each job's scope).
"""

from __future__ import annotations

from taskq.app.di.chain import (
    ThreadLocalRef,
    WorkerScopes,
    build_actor_scope,
    resolve_thread_locals,
)
from taskq.app.di.registry import Dependencies
from taskq.app.di.scopes import LoopScope, ProcessScope, ThreadScope
from taskq.app.di.spec import ActorDependencies, DependencyError, DependencySpec, Factory, Scope

__all__ = [
    "ActorDependencies",
    "Dependencies",
    "DependencyError",
    "DependencySpec",
    "Factory",
    "LoopScope",
    "ProcessScope",
    "Scope",
    "ThreadLocalRef",
    "ThreadScope",
    "WorkerScopes",
    "build_actor_scope",
    "resolve_thread_locals",
]
