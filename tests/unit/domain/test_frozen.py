"""fast_constructor: a frozen dataclass built without its frozen __init__, same object."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from taskq.domain.frozen import fast_constructor
from taskq.domain.job import ClaimedJob, EnqueueResult, NewJob


@dataclass(frozen=True, slots=True)
class _Point:
    x: int
    y: int = 0
    tags: list[str] = field(default_factory=list)
    label: str = field(default="p", kw_only=True)


def test_builds_an_instance_of_the_class_equal_to_the_normal_one() -> None:
    build = fast_constructor(_Point)
    fast = build(1, 2, ["a"], label="q")
    assert type(fast) is _Point
    assert fast == _Point(1, 2, ["a"], label="q")
    assert repr(fast) == repr(_Point(1, 2, ["a"], label="q"))


def test_defaults_and_factories_apply_and_each_object_gets_its_own() -> None:
    build = fast_constructor(_Point)
    first, second = build(1), build(1)
    assert (first.y, first.tags, first.label) == (0, [], "p")
    assert first.tags is not second.tags


def test_the_result_stays_frozen() -> None:
    point = fast_constructor(_Point)(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.x = 2  # type: ignore[misc]


def test_the_signature_is_checked_as_the_class_checks_it() -> None:
    build = fast_constructor(_Point)
    with pytest.raises(TypeError):
        build()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        build(1, 2, [], "positional label")  # type: ignore[call-arg]


def test_the_result_hashes_as_the_normal_one() -> None:
    @dataclass(frozen=True, slots=True)
    class Key:
        a: str
        b: int

    assert hash(fast_constructor(Key)("k", 1)) == hash(Key("k", 1))


@pytest.mark.parametrize("cls", [NewJob, ClaimedJob, EnqueueResult])
def test_the_domain_records_it_is_used_for_switch_classes(cls: type) -> None:
    # A layout the interpreter will not switch would make fast_constructor return the
    # class itself: still correct, but not fast.
    assert fast_constructor(cls) is not cls


def test_a_class_that_is_no_slots_dataclass_is_refused() -> None:
    @dataclass(frozen=True)
    class NoSlots:
        a: int

    with pytest.raises(TypeError, match="not a slots dataclass"):
        fast_constructor(NoSlots)


def test_a_class_with_post_init_is_refused() -> None:
    @dataclass(frozen=True, slots=True)
    class Checked:
        a: int

        def __post_init__(self) -> None:
            if self.a < 0:
                raise ValueError("negative")

    with pytest.raises(TypeError, match="__post_init__"):
        fast_constructor(Checked)


def test_a_layout_that_cannot_switch_falls_back_to_the_class() -> None:
    @dataclass(frozen=True, slots=True)
    class Base:
        a: int

    @dataclass(frozen=True, slots=True)
    class Child(Base):
        b: int

    build = fast_constructor(Child)
    assert build is Child
    assert build(1, 2) == Child(1, 2)
