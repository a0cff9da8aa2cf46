"""What the client stores of a payload or a result is exactly what was given, or a named
refusal: no NaN turned into null, no secret into asterisks, no subclass field, and
aliased fields that round-trip."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import BaseModel, Field, SecretBytes, SecretStr

from taskq import JobsClient
from taskq.app.actors import actor
from taskq.domain.errors import ConfigurationError, PayloadValidationError


class Metrics(BaseModel):
    values: dict  # type: ignore[type-arg]  # an untyped blob, as users write it
    extra: Any = None
    items: list = []  # type: ignore[type-arg]


@actor
async def record(payload: Metrics) -> None: ...


class Signup(BaseModel):
    user_id: int = Field(alias="userId")
    source: str = Field("web", validation_alias="src", serialization_alias="origin")


class Welcome(BaseModel):
    greeting_text: str = Field(alias="greetingText")


@actor
async def on_signup(payload: Signup) -> Welcome:
    return Welcome(greetingText=f"hi {payload.user_id} from {payload.source}")


class Notify(BaseModel):
    user_id: int


class InternalNotify(Notify):
    api_token: str


@actor
async def notify(payload: Notify) -> None: ...


class Upload(BaseModel):
    data: bytes


@actor
async def upload(payload: Upload) -> None: ...


class Tree(BaseModel):
    node: Any = None


@actor
async def tree(payload: Tree) -> None: ...


@pytest.mark.parametrize(
    ("payload", "where"),
    [
        (Metrics(values={"latency": math.inf}), "payload['values']['latency'] is inf"),
        (Metrics(values={}, extra={"r": [1.0, -math.inf]}), "payload['extra']['r'][1] is -inf"),
        (Metrics(values={}, items=[math.nan]), "payload['items'][0] is nan"),
    ],
    ids=["dict", "any", "list"],
)
async def test_nan_in_an_untyped_field_is_refused_not_stored_as_null(
    client: JobsClient, payload: Metrics, where: str
) -> None:
    """NaN or infinity in a dict, Any or list field is refused naming it, as in a float
    field; before, pydantic's dump wrote null and the job was stored."""
    with pytest.raises(ValueError, match="the job cannot be stored") as caught:
        await client.enqueue(record, payload)
    assert where in str(caught.value)
    with pytest.raises(ValueError, match="the batch cannot be stored") as caught:
        await client.enqueue_many(record, [Metrics(values={}), payload])
    assert f"payload #1{where.removeprefix('payload')}" in str(caught.value)
    assert await client.get(1) is None  # nothing written


@pytest.mark.parametrize("value", [math.nan, {"v": math.inf}, [1.0, -math.inf]])
def test_a_nan_result_of_an_untyped_actor_is_refused(value: object) -> None:
    """An unannotated or ``-> Any`` actor's NaN result is refused, not dumped as null."""

    @actor
    async def untyped(payload: Notify): ...  # type: ignore[no-untyped-def]

    @actor
    async def any_result(payload: Notify) -> Any: ...

    for ref in (untyped, any_result):
        with pytest.raises(ValueError, match=r"cannot be stored: result.* is (nan|inf|-inf)"):
            ref.dump_result(value)


async def test_aliased_fields_are_stored_by_name_and_read_back(client: JobsClient) -> None:
    """A payload or result with aliases (also distinct validation and serialization
    aliases) is stored by field name and validates as the worker reads it."""
    model = Signup(userId=7, src="app")  # type: ignore[call-arg]
    for given in (model, {"userId": 7, "src": "app"}):
        handle = await client.enqueue(on_signup, given)
        stored = await client.get(handle.job_id)
        assert stored is not None
        assert dict(stored.payload) == {"user_id": 7, "source": "app"}
        assert on_signup.load_payload(stored.payload) == model
    result = on_signup.dump_result(Welcome(greetingText="hi"))
    assert result == {"greeting_text": "hi"}
    assert on_signup.load_result(result) == Welcome(greetingText="hi")


def test_stored_json_keyed_by_alias_is_read_too() -> None:
    """Rows another producer wrote with the model's (validation) aliases, as the
    model itself reads them, load as well as TaskQ's own rows keyed by name."""
    model = Signup(userId=7, src="app")  # type: ignore[call-arg]
    assert on_signup.load_payload({"userId": 7, "src": "app"}) == model
    assert on_signup.load_payload({"user_id": 7, "source": "app"}) == model
    assert on_signup.load_result({"greetingText": "hi"}) == Welcome(greetingText="hi")


async def test_a_subclass_instance_stores_only_the_declared_fields(client: JobsClient) -> None:
    """An instance of a subclass of the payload model is dumped as the declared model:
    its extra fields (here a token) are not written."""
    handle = await client.enqueue(notify, InternalNotify(user_id=1, api_token="sk_live_1"))
    stored = await client.get(handle.job_id)
    assert stored is not None
    assert dict(stored.payload) == {"user_id": 1}
    [many] = await client.enqueue_many(notify, [InternalNotify(user_id=2, api_token="x")])
    stored = await client.get(many.job_id)
    assert stored is not None
    assert dict(stored.payload) == {"user_id": 2}


def test_a_secret_in_the_payload_or_result_type_is_refused_at_decoration() -> None:
    """pydantic dumps a secret as asterisks, which the actor would then receive: the
    decorator refuses it, naming the field, instead of storing the mask."""

    class Creds(BaseModel):
        keys: list[SecretBytes] = []

    class WithSecret(BaseModel):
        user_id: int
        inner: Creds

    class Token(BaseModel):
        token: SecretStr

    with pytest.raises(
        ConfigurationError, match=r"payload holds a pydantic secret at 'inner\.keys'"
    ):

        @actor
        async def leaky(payload: WithSecret) -> None: ...

    with pytest.raises(ConfigurationError, match="result holds a pydantic secret at 'token'"):

        @actor
        async def leaky_result(payload: Notify) -> Token:
            return Token(token=SecretStr("x"))


async def test_unstorable_bytes_and_depth_are_payload_errors(client: JobsClient) -> None:
    """Non-UTF-8 bytes and too-deep nesting are PayloadValidationErrors naming what is
    wrong (in a batch, the index), not a raw UnicodeDecodeError or ValueError."""
    with pytest.raises(PayloadValidationError, match=r"payload\['data'\] is not UTF-8"):
        await client.enqueue(upload, Upload(data=b"\x89PNG\xff"))
    with pytest.raises(PayloadValidationError, match=r"payload #1: .*\['data'\] is not UTF-8"):
        await client.enqueue_many(upload, [Upload(data=b"ok"), Upload(data=b"\xff")])
    deep: list[Any] = []
    for _ in range(1000):
        deep = [deep]
    with pytest.raises(PayloadValidationError, match="nested deeper than JSON"):
        await client.enqueue(tree, Tree(node=deep))
    assert await client.get(1) is None
