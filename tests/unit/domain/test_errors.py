"""The error hierarchy: one root, the documented tree, messages that name things."""

from __future__ import annotations

import copy
import inspect
import pickle
import re

import pytest

from taskq.domain import errors
from taskq.domain.errors import (
    ActorConfigDriftError,
    ActorConfigDriftList,
    JobFailed,
    JobNotFound,
    LeaseLost,
    MaxPendingExceeded,
    SettingsInvariantError,
    TaskQError,
    UnknownActorError,
)

ERROR_CLASSES = [
    obj
    for _, obj in inspect.getmembers(errors, inspect.isclass)
    if issubclass(obj, BaseException) and obj.__module__ == errors.__name__
]


def _documented_tree() -> dict[str, str | None]:
    """Map each class in the module docstring's tree to its drawn parent."""
    parents: dict[str, str | None] = {}
    stack: list[str] = []
    for line in (errors.__doc__ or "").splitlines():
        m = re.match(r"^ {4}((?:[│ ] {3})*)(?:[├└]── )?([A-Z]\w+)", line)
        if m is None:
            continue
        depth = len(m.group(1)) // 4 + (1 if "──" in line else 0)
        del stack[depth:]
        parents[m.group(2)] = stack[-1] if stack else None
        stack.append(m.group(2))
    return parents


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_every_error_derives_from_taskq_error(cls: type[BaseException]) -> None:
    """Every exception class in errors.py is a TaskQError, so one except catches them all."""
    assert issubclass(cls, TaskQError)


def test_module_docstring_tree_matches_the_classes() -> None:
    """The tree drawn in the module docstring lists every class under its real parent."""
    tree = _documented_tree()
    assert set(tree) == {c.__name__ for c in ERROR_CLASSES}
    for cls in ERROR_CLASSES:
        (base,) = cls.__bases__
        expected = None if cls is TaskQError else base.__name__
        assert tree[cls.__name__] == expected, cls.__name__


def test_settings_invariant_error_lists_every_violation() -> None:
    """SettingsInvariantError keeps each violation line and shows them all in its message."""
    lines = [
        "TASKQ_LOCK_LEASE (30.0) must be >= 4 × TASKQ_HEARTBEAT_INTERVAL (10.0) = 40.0",
        "TASKQ_CLEANUP_GRACE_PERIOD (-1.0) must be a finite number > 0",
    ]
    err = SettingsInvariantError(lines)
    assert err.violations == tuple(lines)
    for line in lines:
        assert line in str(err)


def test_unknown_actor_names_the_actor() -> None:
    """UnknownActorError carries and names the actor."""
    err = UnknownActorError("send_email")
    assert err.actor == "send_email"
    assert "'send_email'" in str(err)


def test_drift_error_names_actor_field_and_both_values() -> None:
    """ActorConfigDriftError names the actor, the field, the stored and the registered value."""
    err = ActorConfigDriftError("mailer", "queue", "default", "email")
    assert (err.actor, err.field, err.stored, err.registered) == (
        "mailer",
        "queue",
        "default",
        "email",
    )
    text = str(err)
    for part in ("'mailer'", "queue", "'default'", "'email'"):
        assert part in text


def test_drift_list_shows_each_drift_and_the_force_flag() -> None:
    """ActorConfigDriftList lists every drift, counts them, and points to the force flag."""
    drifts = [
        ActorConfigDriftError("mailer", "queue", "default", "email"),
        ActorConfigDriftError("nightly", "metadata", {"a": 1}, {"a": 2}),
    ]
    err = ActorConfigDriftList(drifts)
    assert err.drifts == tuple(drifts)
    text = str(err)
    assert "(2)" in text
    for d in drifts:
        assert str(d) in text
    assert "--force-update-actor-config" in text


def test_max_pending_names_actor_and_limit() -> None:
    """MaxPendingExceeded names the actor and its max_pending, and is an enqueue refusal."""
    err = MaxPendingExceeded("mailer", 500)
    assert (err.actor, err.max_pending) == ("mailer", 500)
    assert "'mailer'" in str(err)
    assert "500" in str(err)
    assert isinstance(err, errors.EnqueueRefused)


def test_job_not_found_names_the_job() -> None:
    """JobNotFound carries and names the job id."""
    err = JobNotFound(4242)
    assert err.job_id == 4242
    assert "4242" in str(err)


def test_lease_lost_names_job_and_fencing_token() -> None:
    """LeaseLost names the job id and the stale fencing token."""
    err = LeaseLost(17, 3)
    assert (err.job_id, err.fencing_token) == (17, 3)
    assert "job 17" in str(err)
    assert "fencing token 3" in str(err)


def test_job_failed_names_job_status_and_error() -> None:
    """JobFailed names the job, its final status and the recorded error (or its absence)."""
    err = JobFailed(9, "failed", "ValueError: boom")
    assert (err.job_id, err.status, err.error) == (9, "failed", "ValueError: boom")
    assert "job 9" in str(err)
    assert "failed" in str(err)
    assert "ValueError: boom" in str(err)
    assert "no error recorded" in str(JobFailed(9, "cancelled", None))


@pytest.mark.parametrize(
    ("cls", "parent"),
    [
        (errors.SettingsInvariantError, errors.ConfigurationError),
        (errors.InvalidIdentifierError, errors.ConfigurationError),
        (errors.RegistryError, errors.ConfigurationError),
        (errors.UnknownActorError, errors.ActorError),
        (errors.MaxPendingLockTimeoutError, errors.EnqueueRefused),
        (errors.UniqueForLockTimeoutError, errors.EnqueueRefused),
        (errors.IdempotencyKeyLockTimeoutError, errors.EnqueueRefused),
    ],
)
def test_errors_callers_catch_by_family(cls: type[TaskQError], parent: type[TaskQError]) -> None:
    """Configuration errors and enqueue refusals can be caught by their family class."""
    assert issubclass(cls, parent)


ROUND_TRIP_SAMPLES = [
    errors.LeaseLost(7, 3),
    errors.JobFailed(5, "failed", "boom"),
    errors.JobNotFound(9),
    errors.UnknownActorError("mailer"),
    errors.MaxPendingExceeded("mailer", 10),
    errors.SettingsInvariantError(["TASKQ_LOCK_LEASE (1.0) is too small"]),
    errors.ActorConfigDriftError("mailer", "queue", "email", "default"),
    errors.ActorConfigDriftList([errors.ActorConfigDriftError("mailer", "queue", "a", "b")]),
    errors.StoreUnavailable("cannot connect to Postgres at 127.0.0.1:5432"),
]


@pytest.mark.parametrize("error", ROUND_TRIP_SAMPLES, ids=lambda e: type(e).__name__)
def test_errors_survive_pickle_and_copy(error: errors.TaskQError) -> None:
    """Errors with custom constructors pickle and copy with their message and attributes intact."""
    for clone in (pickle.loads(pickle.dumps(error)), copy.copy(error), copy.deepcopy(error)):
        assert type(clone) is type(error)
        assert str(clone) == str(error)
        public = {k: v for k, v in vars(error).items() if not k.startswith("_")}
        assert {
            k: v for k, v in vars(clone).items() if not k.startswith("_")
        }.keys() == public.keys()
        for key, value in public.items():
            if isinstance(value, tuple) and value and isinstance(value[0], Exception):
                assert [str(v) for v in getattr(clone, key)] == [str(v) for v in value]
            else:
                assert getattr(clone, key) == value
