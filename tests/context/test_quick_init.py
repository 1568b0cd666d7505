"""`quick_init`: frozen, slotted dataclasses built fast, and still frozen."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from dataclasses import dataclass, field

import pytest

from actors.context._quick_init import quick_init


@quick_init
@dataclass(frozen=True, slots=True)
class Point:
    x: int
    y: int = 0
    tags: list[str] = field(default_factory=list)


def test_it_takes_the_same_arguments_defaults_and_factories() -> None:
    assert Point(1) == Point(1, 0, [])
    assert Point(1, 2, ["a"]).tags == ["a"]
    assert Point(x=3, y=4).y == 4
    assert Point(1).tags is not Point(1).tags  # a fresh list each time, as dataclasses do
    assert str(inspect.signature(Point)) == "(x, y=0, tags=<factory>)"
    with pytest.raises(TypeError):
        Point()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Point(1, 2, [], 4)  # type: ignore[call-arg]


def test_it_stays_frozen_hashable_and_picklable() -> None:
    point = Point(1, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.x = 5  # type: ignore[misc]
    assert hash(Point(1, 2, ())) == hash(Point(1, 2, ()))  # type: ignore[arg-type]
    assert pickle.loads(pickle.dumps(point)) == point
    assert repr(point) == "Point(x=1, y=2, tags=[])"


def test_it_refuses_what_it_cannot_build() -> None:
    @dataclass(slots=True)
    class Mutable:
        x: int

    @dataclass(frozen=True)
    class NoSlots:
        x: int

    @dataclass(frozen=True, slots=True)
    class Checked:
        x: int

        def __post_init__(self) -> None:
            pass

    @dataclass(frozen=True, slots=True, kw_only=True)
    class KeywordOnly:
        x: int

    for cls in (Mutable, NoSlots, Checked, KeywordOnly):
        with pytest.raises(TypeError, match="quick_init"):
            quick_init(cls)


def test_field_names_do_not_clash_with_its_own_and_inherited_fields_are_refused() -> None:
    @quick_init
    @dataclass(frozen=True, slots=True)
    class Odd:
        self: int = 1
        _MISSING: list[int] = field(default_factory=list)

    assert Odd().self == 1
    assert Odd()._MISSING == []

    @dataclass(frozen=True, slots=True)
    class Base:
        a: int

    @dataclass(frozen=True, slots=True)
    class Child(Base):
        b: int = 0

    with pytest.raises(TypeError, match="quick_init"):
        quick_init(Child)
