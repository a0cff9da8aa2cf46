"""A limit key a payload fills must be one the limiter's store can keep.

Before, a key past what a store's index holds (or holding a NUL) made every
``reserve``/``acquire_rate`` fail, which the worker treats as the limiter being
down: the job was snoozed, again and again, forever. It is the payload's fault,
so the key is refused as the payload's: ``PayloadValidationError``, never retried.
"""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest

from taskq.domain.errors import PayloadValidationError
from taskq.domain.limits import ConcurrencyLimit, RateLimit
from taskq.domain.storable import MAX_KEY_LENGTH

LIMITS = [
    ConcurrencyLimit("tenant:{tenant}", capacity=2),
    RateLimit("tenant:{tenant}", limit=5, per=timedelta(seconds=1)),
]


@pytest.mark.parametrize("limit", LIMITS, ids=["reservation", "rate"])
def test_a_key_too_long_for_a_store_is_the_payloads_fault(
    limit: ConcurrencyLimit | RateLimit,
) -> None:
    with pytest.raises(
        PayloadValidationError, match=r"resolves to [\d,]+ characters for this payload; at most 400"
    ):
        limit.key_for(SimpleNamespace(tenant="t" * MAX_KEY_LENGTH))


@pytest.mark.parametrize("limit", LIMITS, ids=["reservation", "rate"])
def test_a_key_holding_nul_is_the_payloads_fault(limit: ConcurrencyLimit | RateLimit) -> None:
    with pytest.raises(PayloadValidationError, match="resolves to text that holds a NUL character"):
        limit.key_for(SimpleNamespace(tenant="a\x00b"))


@pytest.mark.parametrize("limit", LIMITS, ids=["reservation", "rate"])
def test_a_long_key_that_fits_is_kept(limit: ConcurrencyLimit | RateLimit) -> None:
    key = limit.key_for(SimpleNamespace(tenant="t" * 300))
    assert key.endswith("tenant:" + "t" * 300)
