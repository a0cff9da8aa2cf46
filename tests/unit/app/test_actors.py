"""@actor, ActorRef, JobContext and registries: signatures, codecs, jobs, running."""

from __future__ import annotations

import asyncio
import textwrap
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, field_serializer, model_validator

from taskq.app.actors import ActorRef, actor, load_registry, registry_from
from taskq.app.context import JobContext
from taskq.app.di import DependencySpec, Scope
from taskq.domain.actor_config import ActorConfig
from taskq.domain.errors import (
    ActorSignatureError,
    ConfigurationError,
    PayloadValidationError,
    RegistryError,
)
from taskq.domain.job import ClaimedJob
from taskq.domain.retry import RetryPolicy

NOW = datetime(2030, 1, 1, tzinfo=UTC)


class Email(BaseModel):
    to: str
    subject: str = ""


class Stamp(BaseModel):
    at: datetime
    count: int


class Receipt(BaseModel):
    message_id: str


class Other(BaseModel):
    x: int


class Smtp:
    """A stand-in dependency type."""


class Cache:
    """Another stand-in dependency type."""


class NotPydantic:
    """A return type pydantic cannot build a schema for."""


def ctx_for(payload: Any, *, actor_name: str = "a") -> JobContext[Any]:
    return JobContext(
        payload=payload,
        job_id=1,
        attempt=1,
        max_attempts=3,
        worker_id="w",
        queue="default",
        actor=actor_name,
        scheduled_at=NOW,
    )


@actor
async def send_email(payload: Email) -> None:
    return None


@actor(
    name="mailer",
    queue="email",
    retry=RetryPolicy(max_attempts=5),
    max_concurrent=4,
    max_pending=100,
    result_ttl=timedelta(hours=1),
    metadata={"team": "growth", "tiers": [1, 2]},
)
def send_sync(payload: Email) -> Receipt:
    return Receipt(message_id=f"id-{payload.to}")


@actor
async def with_everything(
    payload: Email,
    job: JobContext[Email],
    smtp: Annotated[Smtp, Scope.PROCESS],
    cache: Annotated[Cache, Scope.TRANSIENT],
) -> dict[str, Any]:
    return {"payload": payload, "ctx": job, "smtp": smtp, "cache": cache}


# ----------------------------------------------------------------- decoration


def test_bare_decorator_uses_defaults() -> None:
    """@actor with no options names the actor after the function and uses the defaults."""
    assert isinstance(send_email, ActorRef)
    assert send_email.name == "send_email"
    assert send_email.queue == "default"
    assert send_email.retry == RetryPolicy()
    assert (send_email.max_concurrent, send_email.max_pending, send_email.result_ttl) == (
        None,
        None,
        None,
    )
    assert dict(send_email.metadata) == {}
    assert send_email.payload_type is Email
    assert send_email.result_type is None
    assert send_email.is_async is True
    assert send_email.wants_context is False
    assert dict(send_email.dependencies) == {}


def test_options_are_recorded() -> None:
    """@actor(...) options end up on the ActorRef, and a plain def is marked sync."""
    assert send_sync.name == "mailer"
    assert send_sync.queue == "email"
    assert send_sync.retry == RetryPolicy(max_attempts=5)
    assert send_sync.max_concurrent == 4
    assert send_sync.max_pending == 100
    assert send_sync.result_ttl == timedelta(hours=1)
    assert dict(send_sync.metadata) == {"team": "growth", "tiers": [1, 2]}
    assert send_sync.result_type is Receipt
    assert send_sync.is_async is False


def test_context_and_dependencies_are_read_from_annotations() -> None:
    """A JobContext parameter (any name) and Annotated[T, Scope.X] parameters are recognised."""
    assert with_everything.wants_context is True
    assert dict(with_everything.dependencies) == {
        "smtp": DependencySpec(Smtp, Scope.PROCESS),
        "cache": DependencySpec(Cache, Scope.TRANSIENT),
    }


def test_actor_defined_in_a_function_resolves_local_names() -> None:
    """String annotations naming a function's local classes resolve at decoration."""

    class LocalPayload(BaseModel):
        n: int

    @actor
    def local(payload: LocalPayload) -> int:
        return payload.n

    assert local.payload_type is LocalPayload
    assert local.result_type is int


def test_call_runs_the_undecorated_function() -> None:
    """Calling an ActorRef calls the function directly (how actors are unit-tested)."""
    assert send_sync(Email(to="a")) == Receipt(message_id="id-a")


def test_actor_ref_is_immutable_and_hashed_by_name() -> None:
    """ActorRef attributes cannot be reassigned, and its hash is its name's hash."""
    with pytest.raises(AttributeError, match="immutable"):
        send_sync.queue = "other"
    assert hash(send_sync) == hash("mailer")
    assert {send_sync: 1}[send_sync] == 1


def test_function_metadata_is_kept() -> None:
    """The ActorRef carries the function's name, module and docstring like a wrapper."""

    @actor
    async def documented(payload: Email) -> None:
        """Sends nothing."""

    assert documented.__name__ == "documented"
    assert documented.__doc__ == "Sends nothing."
    assert documented.__module__ == __name__


# ----------------------------------------------------------------- signature errors


def _no_params() -> None: ...


def _unannotated(payload) -> None:  # type: ignore[no-untyped-def]
    ...


def _int_payload(payload: int) -> None: ...


def _base_model_payload(payload: BaseModel) -> None: ...


def _var_args(payload: Email, *rest: int) -> None: ...


def _var_kwargs(payload: Email, **rest: int) -> None: ...


def _plain_extra(payload: Email, count: int) -> None: ...


def _unannotated_extra(payload: Email, thing) -> None:  # type: ignore[no-untyped-def]
    ...


def _annotated_without_scope(payload: Email, smtp: Annotated[Smtp, "process"]) -> None: ...


def _two_scopes(payload: Email, smtp: Annotated[Smtp, Scope.PROCESS, Scope.LOOP]) -> None: ...


def _two_contexts(payload: Email, a: JobContext[Email], b: JobContext[Email]) -> None: ...


def _wrong_context(payload: Email, ctx: JobContext[Other]) -> None: ...


def _generator(payload: Email) -> Iterator[int]:
    yield 1


def _keyword_only_payload(*, payload: Email) -> None: ...


def _unresolvable(payload: Email) -> Missing:  # type: ignore[name-defined]  # noqa: F821
    ...


def _bad_return(payload: Email) -> NotPydantic:
    return NotPydantic()


@pytest.mark.parametrize(
    ("fn", "problem"),
    [
        (_no_params, "takes no parameters"),
        (_unannotated, "has no annotation"),
        (_int_payload, "pydantic BaseModel subclass"),
        (_base_model_payload, "pydantic BaseModel subclass"),
        (_var_args, "*rest is not supported"),
        (_var_kwargs, "**rest is not supported"),
        (_plain_extra, "must be annotated JobContext[Payload] or Annotated[T, Scope.X]"),
        (_unannotated_extra, "'thing' has no annotation"),
        (_annotated_without_scope, "exactly one Scope marker"),
        (_two_scopes, "exactly one Scope marker"),
        (_two_contexts, "both ask for JobContext"),
        (_wrong_context, "use JobContext[Email]"),
        (_generator, "generator function"),
        (_keyword_only_payload, "must not be keyword-only"),
        (_unresolvable, "cannot resolve an annotation"),
        (_bad_return, "not something pydantic can validate"),
    ],
    ids=lambda v: v.__name__ if callable(v) else "",
)
def test_bad_signatures_fail_at_decoration(fn: Callable[..., Any], problem: str) -> None:
    """Every signature rule is checked when @actor runs, naming the function and the problem."""
    with pytest.raises(ActorSignatureError) as info:
        actor(fn)
    message = str(info.value)
    assert fn.__qualname__ in message
    assert problem in message


def test_non_functions_are_refused() -> None:
    """@actor on something that is not a function raises ActorSignatureError."""
    with pytest.raises(ActorSignatureError, match="needs a function"):
        actor(Email)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"queue": ""}, "queue must be a non-empty string"),
        ({"name": " padded"}, "name must be a non-empty string"),
        ({"max_concurrent": 0}, "max_concurrent must be an int in"),
        ({"max_pending": -1}, "max_pending must be an int in"),
        ({"max_pending": True}, "max_pending must be an int in"),
        ({"result_ttl": timedelta(0)}, "result_ttl must be a positive timedelta"),
        ({"metadata": {"when": NOW}}, "not JSON"),
        ({"metadata": {1: "x"}}, "non-string key"),
        ({"metadata": [1, 2]}, r"metadata must be a mapping of str to JSON values, got \[1, 2\]"),
        ({"retry": {"max_attempts": 2}}, "retry must be a RetryPolicy"),
    ],
)
def test_bad_options_are_configuration_errors(options: dict[str, Any], problem: str) -> None:
    """Invalid decorator options raise ConfigurationError naming the option."""

    async def fine(payload: Email) -> None: ...

    with pytest.raises(ConfigurationError, match=problem):
        actor(**options)(fine)


def test_decorating_an_actor_twice_is_refused() -> None:
    """Wrapping an ActorRef in @actor again is a ConfigurationError."""
    with pytest.raises(ConfigurationError, match="already an actor"):
        actor(send_email)


# ----------------------------------------------------------------- payloads and results


def test_validate_payload_accepts_json_objects() -> None:
    """A stored JSON object validates into the payload model."""
    assert send_email.validate_payload({"to": "a@b"}) == Email(to="a@b")


def test_validate_payload_raises_with_pydantic_message() -> None:
    """An invalid payload raises PayloadValidationError naming the actor and the field."""
    with pytest.raises(PayloadValidationError) as info:
        send_email.validate_payload({"subject": "no recipient"})
    assert "send_email" in str(info.value)
    assert "to" in str(info.value)


def test_dump_payload_is_json_mode() -> None:
    """Payloads dump to JSON-compatible values whether given as a model or a dict."""

    @actor
    async def stamped(payload: Stamp) -> None: ...

    from_model = stamped.dump_payload(Stamp(at=NOW, count=2))
    from_dict = stamped.dump_payload({"at": NOW, "count": "2"})
    assert from_model == from_dict == {"at": "2030-01-01T00:00:00Z", "count": 2}


def test_dump_payload_refuses_another_model() -> None:
    """An instance of a different model is not accepted as the payload."""
    with pytest.raises(PayloadValidationError):
        send_email.dump_payload(Other(x=1))  # type: ignore[arg-type]


def test_dump_payload_revalidates_unvalidated_models() -> None:
    """A model built without validation that the worker would refuse is refused here."""
    bogus = Email.model_construct(to=None)
    with pytest.raises(PayloadValidationError):
        send_email.dump_payload(bogus)


class Renamed(BaseModel):
    """Dumps a ``code`` above 1 as a string the model itself refuses: the worker could
    not read it."""

    code: int

    @field_serializer("code")
    def _as_text(self, code: int) -> int | str:
        return code if code < 2 else f"#{code}"


def test_dump_payloads_revalidates_a_dump_that_differs_from_the_dict_given() -> None:
    """A dict whose dump is not itself (here a serializer rewrites a field) is validated
    again as the worker will read it, and refused with its index, as dump_payload does."""

    @actor
    async def coded(payload: Renamed) -> None: ...

    assert coded.dump_payloads([{"code": 1}]) == [{"code": 1}]
    with pytest.raises(PayloadValidationError):
        coded.dump_payload({"code": 2})
    with pytest.raises(PayloadValidationError, match="payload #1"):
        coded.dump_payloads([{"code": 1}, {"code": 2}])
    with pytest.raises(PayloadValidationError, match="payload #0"):
        coded.dump_payloads([Renamed(code=3)])


def test_dump_payloads_validates_a_dict_equal_to_its_dump_once() -> None:
    """The second validation is skipped only where it must give the first's answer: a
    plain dict equal to its own dump. A model, or a dict that dumps differently, gets it."""
    calls: list[object] = []

    class Counted(BaseModel):
        n: int

        @model_validator(mode="before")
        @classmethod
        def _count(cls, value: object) -> object:
            calls.append(value)
            return value

    @actor
    async def counted(payload: Counted) -> None: ...

    assert counted.dump_payloads([{"n": 1}, {"n": 2}]) == [{"n": 1}, {"n": 2}]
    assert calls == [{"n": 1}, {"n": 2}]
    model = Counted(n=4)
    calls.clear()
    assert counted.dump_payloads([{"n": "3"}, model]) == [{"n": 3}, {"n": 4}]
    assert calls == [{"n": "3"}, {"n": 3}, {"n": 4}]  # 3 differs from "3"; a model's dump
    calls.clear()
    assert counted.dump_payloads([{"n": 5, "extra": 1}]) == [{"n": 5}]
    assert len(calls) == 2  # an ignored key makes the dump differ


@given(to=st.text(), subject=st.text(), count=st.integers())
def test_payload_round_trips(to: str, subject: str, count: int) -> None:
    """validate_payload(dump_payload(p)) gives back p for any valid payload."""
    payload = Email(to=to, subject=subject + str(count))
    assert send_email.validate_payload(send_email.dump_payload(payload)) == payload


def test_results_round_trip_through_json() -> None:
    """dump_result gives JSON and load_result the typed value back."""
    raw = send_sync.dump_result(Receipt(message_id="m1"))
    assert raw == {"message_id": "m1"}
    assert send_sync.load_result(raw) == Receipt(message_id="m1")


def test_container_results_round_trip() -> None:
    """Any type pydantic validates (here a list of models) works as a result type."""

    @actor
    async def many(payload: Email) -> list[Receipt]:
        return []

    raw = many.dump_result([Receipt(message_id="a"), Receipt(message_id="b")])
    assert raw == [{"message_id": "a"}, {"message_id": "b"}]
    assert many.load_result(raw) == [Receipt(message_id="a"), Receipt(message_id="b")]


def test_none_results_pass_through() -> None:
    """An actor declared -> None dumps and loads None."""
    assert send_email.dump_result(None) is None
    assert send_email.load_result(None) is None


def test_a_none_result_of_an_optional_type_still_goes_through_its_type() -> None:
    """Only an actor declared to return nothing skips the adapter for None; an
    Optional result type validates None itself, and a non-optional one refuses it."""

    @actor
    async def maybe(payload: Email) -> Receipt | None:
        return None

    assert maybe.dump_result(None) is None
    with pytest.raises(TypeError, match="mailer"):
        send_sync.dump_result(None)  # type: ignore[arg-type]


def test_wrong_result_type_is_a_type_error() -> None:
    """A result that is not the declared type cannot be dumped."""
    with pytest.raises(TypeError, match="mailer"):
        send_sync.dump_result("not a receipt")  # type: ignore[arg-type]


def test_unloadable_result_is_a_value_error() -> None:
    """Stored JSON that does not validate as the result type raises ValueError."""
    with pytest.raises(ValueError, match="stored result"):
        send_sync.load_result({"nope": 1})


def test_missing_return_annotation_means_any() -> None:
    """Without a return annotation, any JSON-able result passes through."""

    @actor
    async def untyped(payload: Email):  # type: ignore[no-untyped-def]
        return {"a": 1}

    assert untyped.dump_result({"a": [1, 2]}) == {"a": [1, 2]}
    assert untyped.load_result({"a": 1}) == {"a": 1}


# ----------------------------------------------------------------- running


async def test_run_passes_payload_context_and_dependencies() -> None:
    """run() calls the function with the payload, the context by name, and the deps."""
    payload, smtp, cache = Email(to="x"), Smtp(), Cache()
    ctx = ctx_for(payload)
    got = await with_everything.run(payload, ctx, {"smtp": smtp, "cache": cache})
    assert got == {"payload": payload, "ctx": ctx, "smtp": smtp, "cache": cache}


async def test_run_rejects_the_wrong_dependencies() -> None:
    """run() refuses a deps mapping that is not exactly the declared dependencies."""
    with pytest.raises(TypeError, match="declares dependencies"):
        await with_everything.run(Email(to="x"), ctx_for(Email(to="x")), {"smtp": Smtp()})


async def test_run_without_a_context_serves_an_actor_that_takes_none() -> None:
    """The worker builds no JobContext for an actor that does not take one."""
    seen: list[Email] = []

    @actor
    async def plain(payload: Email) -> None:
        seen.append(payload)

    assert not plain.wants_context
    await plain.run(Email(to="x"), None, {})
    assert seen == [Email(to="x")]


async def test_run_without_a_context_is_refused_for_an_actor_that_takes_one() -> None:
    """A context-taking actor is never called with None in its place."""
    assert with_everything.wants_context
    with pytest.raises(TypeError, match="takes a JobContext"):
        await with_everything.run(Email(to="x"), None, {"smtp": Smtp(), "cache": Cache()})


async def test_sync_actors_run_in_a_worker_thread() -> None:
    """A plain def runs off the event loop's thread."""
    seen: list[int] = []

    @actor
    def where(payload: Email) -> None:
        seen.append(threading.get_ident())

    await where.run(Email(to="x"), ctx_for(Email(to="x")), {})
    assert len(seen) == 1
    assert seen[0] != threading.get_ident()


async def test_sync_actor_does_not_block_the_loop() -> None:
    """While a sync actor blocks, other tasks on the loop keep running."""
    release = threading.Event()

    @actor
    def blocking(payload: Email) -> str:
        assert release.wait(timeout=10)
        return "done"

    async def unblock() -> None:
        release.set()

    run = asyncio.create_task(blocking.run(Email(to="x"), ctx_for(Email(to="x")), {}))
    await asyncio.create_task(unblock())  # only possible if the loop is free
    assert await run == "done"


async def test_positional_only_dependencies_are_passed_positionally() -> None:
    """Parameters declared before / get their values by position."""

    @actor
    async def positional(
        payload: Email, smtp: Annotated[Smtp, Scope.LOOP], /, ctx: JobContext[Email]
    ) -> object:
        return smtp

    smtp = Smtp()
    assert await positional.run(Email(to="x"), ctx_for(Email(to="x")), {"smtp": smtp}) is smtp


async def test_errors_from_the_actor_propagate() -> None:
    """run() lets the actor's own exception through unchanged."""

    @actor
    def broken(payload: Email) -> None:
        raise LookupError("boom")

    with pytest.raises(LookupError, match="boom"):
        await broken.run(Email(to="x"), ctx_for(Email(to="x")), {})


# ----------------------------------------------------------------- config and jobs


def test_config_carries_queue_metadata_and_capacity_literals() -> None:
    """config() is the actor_config row the actor registers."""
    assert send_sync.config() == ActorConfig(
        actor="mailer",
        queue="email",
        metadata={"team": "growth", "tiers": [1, 2]},
        max_concurrent=4,
        max_pending=100,
        result_ttl=timedelta(hours=1),
    )


def test_new_job_fills_in_the_actor_literals() -> None:
    """new_job dumps the payload and stores queue, max_attempts and the max_pending literal."""
    job = send_sync.new_job(Email(to="a"), now=NOW, tags=["t"], metadata={"k": 1}, priority=5)
    assert job.actor == "mailer"
    assert job.queue == "email"
    assert job.payload == {"to": "a", "subject": ""}
    assert job.max_attempts == 5
    assert job.max_pending == 100
    assert job.priority == 5
    assert tuple(job.tags) == ("t",)
    assert dict(job.metadata) == {"k": 1}
    assert job.schedule_to_close is None


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (RetryPolicy(kind="transient", max_attempts=7), 7),
        (RetryPolicy(kind="indefinite"), None),
        (RetryPolicy(kind="non_retryable"), 1),
    ],
)
def test_new_job_max_attempts_follows_the_policy(policy: RetryPolicy, expected: int | None) -> None:
    """The job's max_attempts is the policy's job_max_attempts."""
    ref = actor(retry=policy)(_fine_actor)
    assert ref.new_job({"to": "a"}, now=NOW).max_attempts == expected


async def _fine_actor(payload: Email) -> None: ...


def test_new_job_turns_a_time_budget_into_a_deadline() -> None:
    """An indefinite time_budget becomes schedule_to_close; an earlier explicit one wins."""
    ref = actor(retry=RetryPolicy(kind="indefinite", time_budget=timedelta(hours=2)))(_fine_actor)
    assert ref.new_job({"to": "a"}, now=NOW).schedule_to_close == NOW + timedelta(hours=2)
    earlier = NOW + timedelta(minutes=5)
    assert ref.new_job({"to": "a"}, now=NOW, schedule_to_close=earlier).schedule_to_close == (
        earlier
    )


def test_new_job_queue_override() -> None:
    """queue= on new_job overrides the actor's queue for that job."""
    assert send_sync.new_job({"to": "a"}, now=NOW, queue="urgent").queue == "urgent"


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"scheduled_at": datetime(2030, 1, 1)}, ValueError),
        ({"tags": "single"}, TypeError),
        ({"priority": "high"}, TypeError),
        ({"metadata": {"x": object()}}, ValueError),
    ],
)
def test_new_job_refuses_bad_options(options: dict[str, Any], error: type[Exception]) -> None:
    """Naive datetimes, a bare string as tags, non-int priority and non-JSON metadata fail."""
    with pytest.raises(error):
        send_sync.new_job({"to": "a"}, now=NOW, **options)


def test_new_job_refuses_invalid_payloads() -> None:
    """new_job raises PayloadValidationError for a payload that does not validate."""
    with pytest.raises(PayloadValidationError):
        send_sync.new_job({"subject": "x"}, now=NOW)


# ----------------------------------------------------------------- JobContext


def test_context_cancelled_follows_the_event() -> None:
    """ctx.cancelled is the cancel event's state."""
    ctx = ctx_for(Email(to="x"))
    assert not ctx.cancelled
    ctx.cancel_event.set()
    assert ctx.cancelled


def test_context_for_claimed_job() -> None:
    """JobContext.for_claimed copies the claimed job's attempt facts."""
    job = ClaimedJob(
        id=9,
        queue="q",
        actor="a",
        payload={"to": "x"},
        priority=0,
        attempt=2,
        max_attempts=3,
        fencing_token=4,
        scheduled_at=NOW,
        lock_expires_at=NOW,
        schedule_to_close=None,
        fairness_key=None,
        metadata={"snooze_count": 1},
        trace_id="t",
        span_id="s",
    )
    ctx = JobContext.for_claimed(job, Email(to="x"), worker_id="w1")
    assert (ctx.job_id, ctx.attempt, ctx.max_attempts, ctx.worker_id) == (9, 2, 3, "w1")
    assert (ctx.queue, ctx.actor, ctx.trace_id, ctx.span_id) == ("q", "a", "t", "s")
    assert dict(ctx.metadata) == {"snooze_count": 1}


def test_context_repr_hides_the_payload() -> None:
    """A context's repr never includes payload values."""
    assert "secret" not in repr(ctx_for(Email(to="secret")))


# ----------------------------------------------------------------- registries


def test_registry_from_list_tuple_and_mapping() -> None:
    """Lists, tuples and name-keyed mappings of ActorRef all become {name: ref}."""
    expected = {"send_email": send_email, "mailer": send_sync}
    assert registry_from([send_email, send_sync]) == expected
    assert registry_from((send_email, send_sync)) == expected
    assert registry_from({"send_email": send_email, "mailer": send_sync}) == expected


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda: (r for r in [send_email]), "one-shot generator"),
        (lambda: iter([send_email]), "one-shot list_iterator"),
        (lambda: {send_email}, "is a set"),
        (lambda: send_email, "single actor"),
        (lambda: [send_email, "x"], "registry item 1 is a str"),
        (lambda: [send_email, send_email], "two actors in the registry are named"),
        (lambda: {"other": send_email}, "does not match the actor's name"),
        (lambda: {"send_email": 3}, "registry entry 'send_email' is a int"),
        (lambda: 42, "got int"),
    ],
)
def test_registry_from_refuses_bad_shapes(make: Callable[[], object], problem: str) -> None:
    """Generators, iterators, sets, single refs, strangers, duplicates and key mismatches fail."""
    with pytest.raises(RegistryError, match=problem):
        registry_from(make())


@pytest.fixture
def actors_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    source = textwrap.dedent(
        """
        from __future__ import annotations
        from pydantic import BaseModel
        from taskq.app.actors import actor

        class P(BaseModel):
            n: int

        @actor
        async def one(payload: P) -> None: ...

        registry = [one]
        class holder:
            nested = {"one": one}
        not_a_registry = (a for a in [one])
        """
    )
    name = f"taskq_test_actors_{abs(hash(tmp_path))}"
    (tmp_path / f"{name}.py").write_text(source)
    (tmp_path / f"{name}_broken.py").write_text("raise RuntimeError('import-time failure')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_load_registry_imports_module_attributes(actors_module: str) -> None:
    """load_registry reads module:attr, including a dotted attribute path."""
    assert list(load_registry(f"{actors_module}:registry")) == ["one"]
    assert list(load_registry(f"{actors_module}:holder.nested")) == ["one"]


@pytest.mark.parametrize(
    ("suffix", "problem"),
    [
        ("", "must look like 'package.module:attribute'"),
        (":", "must look like 'package.module:attribute'"),
        (":missing", "no attribute 'missing'"),
        (":not_a_registry", "one-shot generator"),
        ("_nope:registry", "cannot import"),
        ("_broken:registry", "import-time failure"),
    ],
)
def test_load_registry_errors_name_the_spec(actors_module: str, suffix: str, problem: str) -> None:
    """Every load_registry failure is a RegistryError naming the spec."""
    spec = actors_module + suffix
    with pytest.raises(RegistryError) as info:
        load_registry(spec)
    assert problem in str(info.value)
    assert repr(spec) in str(info.value)


def test_a_result_no_store_can_keep_is_refused_by_name() -> None:
    """A NUL in a result would make its terminal write fail forever: refused here instead,
    naming the actor, so the job fails for good with a reason."""
    with pytest.raises(ValueError, match=r"the result of actor 'mailer' holds a NUL character"):
        send_sync.dump_result(Receipt(message_id="m\x001"))
    assert send_sync.dump_result(Receipt(message_id="m\\u0000")) == {"message_id": "m\\u0000"}
