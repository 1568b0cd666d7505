"""Models built without validation, from values the framework made and checked itself.

An agent builds a dozen events and a few messages per run from strings it holds and counts it
made: validating them again is most of what building them costs. `unchecked` sets a model's
fields the way ``model_construct`` does, minus its generality; `SetFields` is the
``__pydantic_fields_set__`` such models share (one set for all, that refuses to change), which
pydantic copies into a plain set whenever it copies a model (``model_copy(update=...)`` adds
to the copy).
"""

from __future__ import annotations

from typing import Any, NoReturn, TypeVar

from pydantic import BaseModel

__all__ = ["SetFields", "set_extra", "set_fields_set", "set_private", "unchecked"]

M = TypeVar("M", bound=BaseModel)

_new = object.__new__
_set = object.__setattr__
# pydantic keeps these three in slots of `BaseModel`: set through their descriptors directly.
set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
set_private = BaseModel.__dict__["__pydantic_private__"].__set__


class SetFields(set[str]):
    """The names of a model's explicitly set fields, shared by every model built one way.

    A set, as pydantic wants one (``model_dump(exclude_unset=True)`` reads it), that refuses
    to change, so one instance serves them all; a copy (pydantic's, when it copies a model) is
    a plain set of the same names, which pydantic may add to.
    """

    __slots__ = ()

    def __copy__(self) -> set[str]:
        return set(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> set[str]:
        return set(self)

    def _shared(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("these fields sets are shared by many models: copy one to change it")

    add = discard = remove = pop = clear = update = _shared
    difference_update = intersection_update = symmetric_difference_update = _shared
    __ior__ = __iand__ = __isub__ = __ixor__ = _shared


def unchecked(cls: type[M], values: dict[str, Any], fields_set: SetFields) -> M:
    """A ``cls`` holding ``values`` (every field, in field order), validated by no one.

    The caller guarantees the values are what validation would have kept.
    """
    model = _new(cls)
    _set(model, "__dict__", values)
    set_fields_set(model, fields_set)
    set_extra(model, None)
    set_private(model, None)
    return model
