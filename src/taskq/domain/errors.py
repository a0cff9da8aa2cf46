"""The one error hierarchy of TaskQ.

Every adapter translates its driver's errors into these at one boundary and
raises them ``from`` the original, so callers and contract tests only ever see
domain errors::

    TaskQError
    ├── ConfigurationError
    │   ├── SettingsInvariantError        (cross-field timing rules; names the variables)
    │   ├── InvalidIdentifierError        (schema names and other SQL identifiers)
    │   ├── RegistryError                 (actor registry of the wrong shape)
    │   ├── MigrationError                (migration files and applied history disagree)
    │   └── SchemaNotMigrated             (the database lacks a table, column or type)
    ├── ActorError
    │   ├── UnknownActorError
    │   └── ActorSignatureError
    ├── ActorConfigDriftError             (one actor × one structural field)
    ├── ActorConfigDriftList              (all drift found in one startup check)
    ├── PayloadValidationError            (never retried)
    ├── DeadlineExceeded                  (schedule_to_close passed)
    ├── AttemptTimeout                    (an attempt ran past its timeout)
    ├── HeartbeatLost                     (recorded on jobs of an isolated worker)
    ├── EnqueueRefused
    │   ├── MaxPendingExceeded
    │   ├── MaxPendingLockTimeoutError
    │   ├── UniqueForLockTimeoutError
    │   └── IdempotencyKeyLockTimeoutError
    ├── JobNotFound
    ├── JobNotRetryable                   (an operator's retry of a job that cannot be retried)
    ├── LeaseLost                         (fencing token no longer matches: not the owner)
    ├── IllegalTransition                 (a status change the lifecycle forbids)
    ├── JobFailed                         (raised by JobHandle.wait for a failed job)
    ├── StoreUnavailable                  (database unreachable or connection dropped)
    │   ├── StoreClosed                   (the store or its pool was closed: not transient)
    │   └── StoreTimeout                  (a call gave up waiting; waited_for says for what)
    │       ├── RowLockTimeout            (a lock on a job's row, held by another session)
    │       ├── PoolWaitTimeout           (a free connection from the pool)
    │       └── ServerAnswerTimeout       (the server's answer)
    ├── TransactionAborted                (the caller's transaction already failed)
    ├── RateLimitUnavailable              (limiter backend failed and no fallback)
    └── ReservationUnavailable            (no concurrency slot free)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Self


class TaskQError(Exception):
    """Base of every error TaskQ raises on purpose.

    Errors cross process and thread boundaries (a sync actor's thread, a
    result stored for another process), so each one pickles and copies with
    its own constructor arguments, whatever its ``__init__`` looks like.
    """

    _ctor: tuple[tuple[object, ...], dict[str, object]]

    def __new__(cls, *args: object, **kwargs: object) -> Self:
        self = super().__new__(cls, *args)
        self._ctor = (args, kwargs)
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        args, kwargs = self._ctor
        return (_rebuild, (type(self), args, kwargs), self.__dict__)


def _rebuild(
    cls: type[TaskQError], args: tuple[object, ...], kwargs: dict[str, object]
) -> TaskQError:
    return cls(*args, **kwargs)


class ConfigurationError(TaskQError):
    """The configuration cannot work; the process should not start."""


class SettingsInvariantError(ConfigurationError):
    """One or more cross-field settings rules are violated.

    ``violations`` holds one human-readable line per broken rule, each naming
    the ``TASKQ_*`` variables involved and their values.
    """

    def __init__(self, violations: Sequence[str]) -> None:
        self.violations = tuple(violations)
        super().__init__("invalid settings: " + "; ".join(self.violations))


class InvalidIdentifierError(ConfigurationError):
    """A value that must be a plain SQL identifier is not one."""


class RegistryError(ConfigurationError):
    """The actor registry is not a mapping or a list/tuple of actors."""


class MigrationError(ConfigurationError):
    """The schema cannot be migrated as asked.

    Raised when an applied migration's file changed (the message names the
    file), the database holds a migration this version does not know, the
    migration files are malformed, a target is unknown, or a migration's SQL
    fails (its transaction is rolled back; earlier migrations stay applied).
    """


class SchemaNotMigrated(ConfigurationError):
    """A statement needs a table, column or type the database does not have.

    The TaskQ schema named by ``TASKQ_SCHEMA_NAME`` is missing, was never
    migrated, or is older than this version of TaskQ: run ``taskq migrate up``.
    The message keeps the server's own words (which object is missing).
    """


class ActorError(TaskQError):
    """Something is wrong with an actor definition or lookup."""


class UnknownActorError(ActorError):
    """No actor with this name is registered."""

    def __init__(self, actor: str) -> None:
        self.actor = actor
        super().__init__(f"unknown actor {actor!r}: it is not in this registry")


class ActorSignatureError(ActorError):
    """An actor function's signature cannot be used."""


class ActorConfigDriftError(TaskQError):
    """A structural actor_config field differs from what this worker registers."""

    def __init__(self, actor: str, field: str, stored: object, registered: object) -> None:
        self.actor = actor
        self.field = field
        self.stored = stored
        self.registered = registered
        super().__init__(
            f"actor {actor!r}: {field} is {stored!r} in actor_config but this worker "
            f"registers {registered!r}"
        )


class ActorConfigDriftList(TaskQError):
    """All structural drift found in one startup check (one entry per actor × field)."""

    def __init__(self, drifts: Sequence[ActorConfigDriftError]) -> None:
        self.drifts = tuple(drifts)
        lines = "\n  ".join(str(d) for d in self.drifts)
        super().__init__(
            f"actor config drift ({len(self.drifts)}):\n  {lines}\n"
            "re-run with --force-update-actor-config to overwrite the stored values"
        )


class PayloadValidationError(TaskQError):
    """A job's payload does not validate against its actor's payload model."""


class DeadlineExceeded(TaskQError):
    """The job's schedule_to_close deadline has passed."""


class AttemptTimeout(TaskQError):
    """An attempt ran past its timeout (``@actor(timeout=...)`` or the enqueue's); the
    worker stopped it. Its class name is the error class recorded on the attempt."""


class HeartbeatLost(TaskQError):
    """The owning worker lost its heartbeat and isolated itself."""


class EnqueueRefused(TaskQError):
    """An enqueue was refused; nothing was written. Retrying later may succeed."""


class MaxPendingExceeded(EnqueueRefused):
    """The actor already has ``max_pending`` pending or scheduled jobs."""

    def __init__(self, actor: str, max_pending: int) -> None:
        self.actor = actor
        self.max_pending = max_pending
        super().__init__(f"actor {actor!r} already has {max_pending} pending jobs (max_pending)")


class MaxPendingLockTimeoutError(EnqueueRefused):
    """Gave up waiting for the per-actor max_pending lock; retry."""


class UniqueForLockTimeoutError(EnqueueRefused):
    """Gave up waiting for the identity-key lock; retry."""


class IdempotencyKeyLockTimeoutError(EnqueueRefused):
    """Gave up waiting for the idempotency-key lock; retry."""


class JobNotFound(TaskQError):
    """No job with this id exists."""

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id
        super().__init__(f"job {job_id} not found")


class JobNotRetryable(TaskQError):
    """An operator's retry was refused; ``reason`` says why (the status found, or the
    active job holding its identity key). Nothing changed."""

    def __init__(self, job_id: int, reason: str) -> None:
        self.job_id = job_id
        self.reason = reason
        super().__init__(f"job {job_id} cannot be retried: {reason}")


class LeaseLost(TaskQError):
    """An owner write matched nothing: the fencing token is stale.

    The job was reclaimed (or finished) by someone else; the caller is no
    longer its owner and must not retry the write.
    """

    def __init__(self, job_id: int, fencing_token: int) -> None:
        self.job_id = job_id
        self.fencing_token = fencing_token
        super().__init__(
            f"job {job_id}: lease with fencing token {fencing_token} is no longer held"
        )


class IllegalTransition(TaskQError):
    """A job status change that the lifecycle forbids."""


class JobFailed(TaskQError):
    """The awaited job ended in a status other than succeeded."""

    def __init__(self, job_id: int, status: str, error: str | None) -> None:
        self.job_id = job_id
        self.status = status
        self.error = error
        super().__init__(f"job {job_id} ended {status}: {error or 'no error recorded'}")


class StoreUnavailable(TaskQError):
    """The backing store cannot be reached or the connection dropped."""


class StoreClosed(StoreUnavailable):
    """The store (or the pool it runs on) was closed: no retry will succeed."""


class StoreTimeout(StoreUnavailable):
    """A store call gave up waiting: ``waited_for`` says for what, ``timeout`` after how
    many seconds (``None`` when a bound not TaskQ's ran out, a session's own
    ``lock_timeout`` say).

    A client's calls are bounded by ``TASKQ_CLIENT_CALL_TIMEOUT``. Like any
    ``StoreUnavailable``, the call may be retried.
    """

    def __init__(self, message: str, *, waited_for: str, timeout: float | None) -> None:
        self.waited_for = waited_for
        self.timeout = timeout
        super().__init__(message)


class RowLockTimeout(StoreTimeout):
    """Another session holds a lock on the job's row longer than the call may wait.

    Nothing was changed. The session is typically a transaction that updated the
    row or locked it (``SELECT ... FOR UPDATE``) and has not ended yet.
    """

    def __init__(self, job_id: int, timeout: float | None) -> None:
        self.job_id = job_id
        after = f" after {timeout:g} s" if timeout is not None else ""
        super().__init__(
            f"gave up{after} waiting for a lock on job {job_id}'s row, which another "
            "session holds (a transaction that updated or locked the row, e.g. with "
            "SELECT ... FOR UPDATE, and has not ended); nothing was changed: retry once "
            "it ends",
            waited_for=f"a lock on job {job_id}'s row",
            timeout=timeout,
        )


class PoolWaitTimeout(StoreTimeout):
    """No connection of the pool came free, or could be opened, in time."""

    def __init__(self, timeout: float, reason: str, *, size: int | None = None) -> None:
        self.size = size
        of = f"the pool of {size}" if size is not None else "the pool"
        super().__init__(
            f"no connection free in {of} within {timeout:g} s: {reason}",
            waited_for="a free connection from the pool",
            timeout=timeout,
        )


class ServerAnswerTimeout(StoreTimeout):
    """Postgres did not answer a statement in time; TaskQ gave the statement up.

    A write may or may not have been applied (its commit may have been under
    way): read the job to know.
    """

    def __init__(self, timeout: float) -> None:
        super().__init__(
            f"Postgres did not answer within {timeout:g} s, so the statement was given up "
            "(a slow or blocked statement, or a server or network that stopped answering); "
            "a write may or may not have been applied",
            waited_for="the server's answer",
            timeout=timeout,
        )


class TransactionAborted(TaskQError):
    """The caller's transaction had already failed (SQLSTATE 25P02): roll it back first."""


class RateLimitUnavailable(TaskQError):
    """The rate limiter's backend failed and no fallback is enabled."""


class ReservationUnavailable(TaskQError):
    """No concurrency reservation slot is free for this key right now."""
