"""@actor(rate_limits=..., reservations=...): checked at decoration, exposed read-only."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel, computed_field

from taskq.app.actors import ActorRef, actor
from taskq.domain.errors import ConfigurationError
from taskq.domain.limits import ConcurrencyLimit, RateLimit

MINUTE = timedelta(minutes=1)


class Call(BaseModel):
    tenant_id: str
    region: str = "eu"

    @computed_field  # type: ignore[prop-decorator]
    @property
    def shard(self) -> str:
        return self.tenant_id[:1]


async def call(payload: Call) -> None: ...


def declare(**options: Any) -> ActorRef[Any, Any]:
    return actor(**options)(call)


def test_limits_are_exposed_as_tuples_and_read_only() -> None:
    """The declared limits are kept in order as tuples; the attributes cannot be set."""
    rate = RateLimit("api", limit=10, per=MINUTE)
    slot = ConcurrencyLimit("tenant:{tenant_id}", capacity=2)
    ref = declare(rate_limits=[rate], reservations=[slot])
    assert ref.rate_limits == (rate,)
    assert ref.reservations == (slot,)
    with pytest.raises(AttributeError, match="immutable"):
        ref.rate_limits = ()


def test_an_actor_without_limits_has_empty_tuples() -> None:
    """Both options default to no limits (None is accepted too)."""
    ref = declare(rate_limits=None)
    assert ref.rate_limits == ()
    assert ref.reservations == ()


def test_a_single_limit_must_be_wrapped_in_a_list() -> None:
    """Passing one RateLimit instead of a list says how to fix it."""
    with pytest.raises(ConfigurationError, match=r"@actor .*call.*rate_limits must be a list.*\["):
        declare(rate_limits=RateLimit("api", limit=1, per=MINUTE))


@pytest.mark.parametrize("value", ["api", {"api": 1}, {RateLimit("a", limit=1, per=MINUTE)}, 3])
def test_the_option_must_be_a_list_or_tuple(value: object) -> None:
    """Strings, mappings, sets and scalars are refused with the option named."""
    with pytest.raises(ConfigurationError, match="rate_limits must be a list or tuple of RateL"):
        declare(rate_limits=value)


def test_a_one_shot_iterator_is_refused() -> None:
    """A generator would be read once; the option must be a list or tuple."""
    gen = (ConcurrencyLimit("x", capacity=1) for _ in range(1))
    with pytest.raises(ConfigurationError, match="reservations must be a list or tuple"):
        declare(reservations=gen)


def test_items_of_the_wrong_kind_point_to_the_other_option() -> None:
    """A ConcurrencyLimit in rate_limits is refused with a hint where it belongs."""
    with pytest.raises(ConfigurationError, match=r"rate_limits\[0\].*belongs in reservations="):
        declare(rate_limits=[ConcurrencyLimit("x", capacity=1)])
    with pytest.raises(ConfigurationError, match=r"reservations\[1\] must be a ConcurrencyLimit"):
        declare(reservations=[ConcurrencyLimit("x", capacity=1), "y"])


def test_template_fields_must_exist_on_the_payload_model() -> None:
    """A template naming a field the payload lacks fails at decoration, listing the fields."""
    with pytest.raises(ConfigurationError, match=r"'tenant:\{tenant\}' names 'tenant'.*Call"):
        declare(reservations=[ConcurrencyLimit("tenant:{tenant}", capacity=1)])
    ref = declare(rate_limits=[RateLimit("{shard}:{region}", limit=1, per=MINUTE)])
    assert ref.rate_limits[0].template_fields == ("shard", "region")


def test_a_limit_declared_twice_is_refused() -> None:
    """The same key (and window) twice would count every job twice."""
    rate = RateLimit("api", limit=1, per=MINUTE)
    with pytest.raises(ConfigurationError, match="declares key 'api' per 0:01:00 twice"):
        declare(rate_limits=[rate, RateLimit("api", limit=5, per=MINUTE)])
    with pytest.raises(ConfigurationError, match="reservations declares key 'db' twice"):
        declare(reservations=[ConcurrencyLimit("db", capacity=1)] * 2)
    # The same key over two window lengths is two limits (per second and per minute).
    ref = declare(rate_limits=[rate, RateLimit("api", limit=1, per=timedelta(seconds=1))])
    assert len(ref.rate_limits) == 2
