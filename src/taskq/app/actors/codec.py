"""An actor's payloads and results, to and from the JSON a store keeps.

The payload side validates what an enqueue gives (a model or a dict), dumps it
by field name and checks the dump validates again as the worker will read it,
so a payload the worker would refuse is refused before anything is written.
The result side checks a return value against the declared type and dumps it,
refusing what no store can keep (NaN, infinity, a NUL character) while the job
can still fail with a reason. Both call pydantic-core directly, which is what
``model_validate`` and ``model_dump`` wrap, at a fraction of their cost.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar, cast

import pydantic_core
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError, SchemaSerializer

from taskq.app.actors.serializers import dump_problem, find_secret, json_serializer
from taskq.app.unstorable import find_unstorable
from taskq.domain.errors import ConfigurationError, PayloadValidationError
from taskq.domain.job import JSON
from taskq.domain.storable import check_json_text

P = TypeVar("P", bound=BaseModel)
R = TypeVar("R")


def _validated_as_given(payload: object, dumped: dict[str, JSON]) -> bool:
    """True when ``dumped``, the JSON dump of ``payload``, needs no validation of its own:
    it is a plain dict equal to it, and so validates as it just did."""
    return type(payload) is dict and dumped == payload


class PayloadCodec(Generic[P]):
    """Validates, dumps and loads the payloads of the actor ``actor``."""

    def __init__(self, actor: str, payload_type: type[P]) -> None:
        self.actor = actor
        self.payload_type = payload_type

    @functools.cached_property
    def _serializer(self) -> SchemaSerializer:
        # Built on first use: the payload model may be completed after the decorator ran.
        return json_serializer(self.payload_type.__pydantic_core_schema__)

    def validate(self, raw: object, *, stored: bool = False) -> P:
        """The model for ``raw``; stored JSON (``stored``) is keyed by field name, as
        dumped. ``PayloadValidationError`` with pydantic's message."""
        try:
            # Aliases are read too for stored rows, which other producers may have
            # written the way the model reads them.
            model: P = self.payload_type.__pydantic_validator__.validate_python(
                raw, by_alias=True if stored else None, by_name=True if stored else None
            )
        except ValidationError as exc:
            raise PayloadValidationError(
                f"actor {self.actor!r}: payload does not validate against "
                f"{self.payload_type.__qualname__}: {exc}"
            ) from exc
        return model

    def dump(self, payload: P | Mapping[str, Any]) -> dict[str, JSON]:
        """The JSON object stored for ``payload`` (validated again as the worker reads it,
        unless it is a dict equal to its dump: that validated already)."""
        validate = self.payload_type.__pydantic_validator__.validate_python
        try:
            dumped: dict[str, JSON] = self._serializer.to_python(
                validate(payload), mode="json", by_alias=False
            )
            if not _validated_as_given(payload, dumped):
                validate(dumped, by_alias=False, by_name=True)
        except ValueError:  # ValidationError, PydanticSerializationError, bad bytes, depth
            return self._dump_checked(payload)  # again, for the error's message
        return dumped

    def _dump_checked(self, payload: P | Mapping[str, Any]) -> dict[str, JSON]:
        """:meth:`dump` again, raising the named errors."""
        model = self.validate(payload)
        try:
            dumped: dict[str, JSON] = self._serializer.to_python(model, mode="json", by_alias=False)
        except ValueError as exc:
            problem = dump_problem(exc, lambda: self._serializer.to_python(model, by_alias=False))
            raise PayloadValidationError(
                f"actor {self.actor!r}: payload cannot be dumped to JSON: {problem}"
            ) from exc
        self.validate(dumped, stored=True)
        return dumped

    def dump_many(self, payloads: Sequence[P | Mapping[str, Any]]) -> list[dict[str, JSON]]:
        """:meth:`dump` of each payload, in order; the first that fails is dumped again
        for its error, ``PayloadValidationError`` prefixed with ``payload #<index>``."""
        validate = self.payload_type.__pydantic_validator__.validate_python
        to_python = self._serializer.to_python
        dumped: list[dict[str, JSON]] = []
        append = dumped.append
        try:
            for payload in payloads:
                value = to_python(validate(payload), mode="json", by_alias=False)
                if not _validated_as_given(payload, value):
                    validate(value, by_alias=False, by_name=True)  # as the worker will read it
                append(value)
        except ValueError:  # as in dump
            pass
        else:
            return dumped
        for index in range(len(dumped), len(payloads)):
            try:
                dumped.append(self.dump(payloads[index]))
            except PayloadValidationError as exc:
                raise PayloadValidationError(f"payload #{index}: {exc}") from exc
        return dumped


class ResultCodec(Generic[R]):
    """Checks, dumps and loads the results of the actor ``actor``."""

    def __init__(self, actor: str, result_type: Any) -> None:
        self.actor = actor
        self.result_type = result_type
        self.adapter: TypeAdapter[Any] = TypeAdapter(
            result_type if result_type is not None else type(None)
        )
        self._serializer = json_serializer(self.adapter.core_schema)
        #: Declared to return nothing: a ``None`` result needs no adapter.
        self._returns_none = result_type in (None, type(None))

    @property
    def label(self) -> str:
        tp = self.result_type
        return "None" if tp is None else getattr(tp, "__qualname__", repr(tp))

    def dump(self, result: R) -> JSON:
        """The JSON stored for ``result``; ``TypeError`` if it is not the declared type,
        ``ValueError`` if no store can keep it."""
        if result is None and self._returns_none:
            return None  # the usual result: nothing to validate or dump
        what = f"the result of actor {self.actor!r}"
        try:
            value = self.adapter.validate_python(result)
            dumped: JSON = self._serializer.to_python(value, mode="json", by_alias=False)
        except (ValidationError, PydanticSerializationError) as exc:
            raise TypeError(
                f"actor {self.actor!r} returned a {type(result).__name__} that is not a valid "
                f"{self.label}: {exc}"
            ) from exc
        except ValueError as exc:  # bytes that are not UTF-8, too deep
            problem = dump_problem(exc, lambda: self._serializer.to_python(value), "result")
            raise ValueError(f"{what} cannot be stored: {problem}") from exc
        if dumped is not None:
            # Refused here, where it fails the job for good with a reason, not at the write
            # (which would also hold back the other jobs of its batch).
            text = pydantic_core.to_json(dumped, inf_nan_mode="constants").decode()
            if "NaN" in text or "Infinity" in text:  # or only inside a string: look
                where = find_unstorable(dumped, "result")
                if where is not None:
                    raise ValueError(f"{what} cannot be stored: {where}")
            check_json_text(text, what)
        return dumped

    def load(self, raw: JSON) -> R:
        """The typed result for stored JSON ``raw``; ``ValueError`` if it does not validate."""
        try:
            return cast(R, self.adapter.validate_python(raw, by_alias=True, by_name=True))
        except ValidationError as exc:
            raise ValueError(
                f"actor {self.actor!r}: stored result is not a valid {self.label}: {exc}"
            ) from exc


def refuse_secrets(where: str, payload_type: type[BaseModel], results: ResultCodec[Any]) -> None:
    """``ConfigurationError`` for a pydantic secret in the payload or result type: pydantic
    writes it to JSON as asterisks, so the job would keep and deliver those, not the secret."""
    schemas = {
        # A model not yet complete (a forward reference still undefined) has no schema yet.
        "payload": payload_type.__pydantic_core_schema__
        if payload_type.__pydantic_complete__
        else None,
        "result": results.adapter.core_schema,
    }
    for what, schema in schemas.items():
        path = find_secret(schema)
        if path is not None:
            raise ConfigurationError(
                f"{where}: the {what} holds a pydantic secret at {path!r}, which JSON keeps "
                "only as '**********': pass a reference to the secret (its name in your vault or "
                "settings) and read it in the actor, or declare the field str to store it "
                "in clear in the jobs table"
            )


__all__ = ["PayloadCodec", "ResultCodec", "refuse_secrets"]
