"""RateLimit and ConcurrencyLimit: validation, key templates and callables, namespacing."""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from taskq.domain.errors import ConfigurationError, PayloadValidationError
from taskq.domain.limits import (
    RATE_KEY_PREFIX,
    RESERVATION_KEY_PREFIX,
    ConcurrencyLimit,
    RateLimit,
    describe_key,
)

MINUTE = timedelta(minutes=1)


def tenant_key(payload: Any) -> str:
    return f"tenant:{payload.tenant_id}"


# -- validation ------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [0, -1, 1.5, True, "3", None])
def test_rate_limit_refuses_a_bad_limit(limit: object) -> None:
    """limit must be an int >= 1; the error names the field and the key."""
    with pytest.raises(ConfigurationError, match=r"RateLimit\('api'\): limit must be an int >= 1"):
        RateLimit("api", limit=limit, per=MINUTE)  # type: ignore[arg-type]


@pytest.mark.parametrize("per", [timedelta(0), timedelta(seconds=-1), 60, None])
def test_rate_limit_refuses_a_bad_window(per: object) -> None:
    """per must be a positive timedelta."""
    with pytest.raises(ConfigurationError, match="per must be a positive timedelta"):
        RateLimit("api", limit=1, per=per)  # type: ignore[arg-type]


@pytest.mark.parametrize("capacity", [0, -3, 2.0, False, None])
def test_concurrency_limit_refuses_a_bad_capacity(capacity: object) -> None:
    """capacity must be an int >= 1; the error names the field."""
    with pytest.raises(
        ConfigurationError, match=r"ConcurrencyLimit\('db'\): capacity must be an int >= 1"
    ):
        ConcurrencyLimit("db", capacity=capacity)  # type: ignore[arg-type]


@pytest.mark.parametrize("key", ["", " api", "api ", 3, None, b"api"])
def test_bad_keys_are_refused(key: object) -> None:
    """A key is a non-empty, unpadded string or a callable; anything else is named."""
    with pytest.raises(ConfigurationError, match="key must be"):
        ConcurrencyLimit(key, capacity=1)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("t:{}", "positional placeholder"),
        ("t:{0}", "positional placeholder"),
        ("t:{p.tenant}", "plain payload field name"),
        ("t:{p[0]}", "plain payload field name"),
        ("t:{tenant", "not a valid template"),
        ("t:}", "not a valid template"),
        ("t:{n:{width}}", "nested placeholder"),
    ],
)
def test_bad_templates_are_refused(key: str, problem: str) -> None:
    """Template keys name plain payload fields only; the error says what is wrong."""
    with pytest.raises(ConfigurationError, match=problem):
        RateLimit(key, limit=1, per=MINUTE)


def test_values_are_frozen_and_positional_only_for_the_key() -> None:
    """The types are immutable, and limit/per/capacity must be named."""
    rate = RateLimit("api", limit=1, per=MINUTE)
    with pytest.raises(FrozenInstanceError):
        rate.limit = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        RateLimit("api", 1, MINUTE)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        ConcurrencyLimit("db", 1)  # type: ignore[call-arg]


def test_equal_declarations_are_equal() -> None:
    """Two equal declarations compare and hash alike (the template cache is not compared)."""
    assert RateLimit("t:{a}", limit=1, per=MINUTE) == RateLimit("t:{a}", limit=1, per=MINUTE)
    assert hash(ConcurrencyLimit("x", capacity=2)) == hash(ConcurrencyLimit("x", capacity=2))
    assert ConcurrencyLimit("x", capacity=2) != ConcurrencyLimit("x", capacity=3)


# -- keys ------------------------------------------------------------------------------


def test_plain_keys_are_namespaced() -> None:
    """Rate keys carry the window; reservation keys their own prefix: they never collide."""
    assert RateLimit("api", limit=5, per=MINUTE).key_for(None) == "rate:60s:api"
    assert ConcurrencyLimit("api", capacity=5).key_for(None) == "reservation:api"
    rate_prefix: str = RATE_KEY_PREFIX  # as a str: the Final literals differ to the type checker
    assert rate_prefix != RESERVATION_KEY_PREFIX


@pytest.mark.parametrize(
    ("per", "label"),
    [
        (timedelta(seconds=1), "1s"),
        (timedelta(hours=1), "3600s"),
        (timedelta(milliseconds=1500), "1500ms"),
        (timedelta(microseconds=250), "250us"),
    ],
)
def test_rate_keys_carry_an_exact_window_label(per: timedelta, label: str) -> None:
    """Windows of different lengths on one key count separately (their keys differ)."""
    assert RateLimit("k", limit=1, per=per).key_for(None) == f"rate:{label}:k"


def test_template_keys_are_filled_from_the_payload() -> None:
    """A {field} template is filled from the payload's attributes (or a mapping's items)."""
    limit = ConcurrencyLimit("tenant:{tenant_id}:{region}:{n:03d}:{{x}}", capacity=1)
    assert limit.template_fields == ("tenant_id", "region", "n")
    payload = SimpleNamespace(tenant_id="acme", region="eu", n=7)
    assert limit.key_for(payload) == "reservation:tenant:acme:eu:007:{x}"
    assert limit.key_for({"tenant_id": "a", "region": "us", "n": 1}) == (
        "reservation:tenant:a:us:001:{x}"
    )


def test_callable_keys_get_the_payload() -> None:
    """A callable key is called with the payload; plain and callable keys name no fields."""
    limit = RateLimit(tenant_key, limit=1, per=MINUTE)
    assert limit.template_fields == ()
    assert limit.key_for(SimpleNamespace(tenant_id=42)) == "rate:60s:tenant:42"
    assert describe_key(tenant_key) == "tenant_key"
    assert describe_key("api") == "api"


def test_a_template_field_missing_from_the_payload_is_a_payload_error() -> None:
    """A payload without the field cannot be limited: PayloadValidationError, never retried."""
    limit = ConcurrencyLimit("tenant:{tenant_id}", capacity=1)
    with pytest.raises(PayloadValidationError, match=r"'tenant:\{tenant_id\}'.*AttributeError"):
        limit.key_for(SimpleNamespace(other=1))


def test_a_failing_or_bad_callable_key_is_a_payload_error() -> None:
    """A key callable that raises or returns no string names the key in the error."""

    def broken(payload: Any) -> str:
        raise KeyError("tenant")

    with pytest.raises(PayloadValidationError, match=r"'test_a_failing.*broken'.*KeyError"):
        RateLimit(broken, limit=1, per=MINUTE).key_for(None)
    with pytest.raises(PayloadValidationError, match="non-empty string, got int 5"):
        ConcurrencyLimit(lambda p: 5, capacity=1).key_for(None)  # type: ignore[arg-type,return-value]
    with pytest.raises(PayloadValidationError, match="non-empty string, got str ''"):
        ConcurrencyLimit(lambda p: "", capacity=1).key_for(None)
