"""Deep, read-only views of a mapping ``tool_context``: what tools see of the static channel.

A tool_context may hold what cannot be copied (a connection, a client), so tools get a view
over the caller's object rather than a copy: nested dicts, lists and sets are wrapped as they
are read, any other object is handed over as it is. Wrapping is lazy, so a view costs one small
object however large the mapping is; the views never show values in their reprs (a
tool_context may hold secrets).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, MutableSequence, MutableSet, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, NoReturn, TypeVar, overload

from actors.exceptions import ToolContextReadOnlyError

__all__ = ["ReadOnlyList", "ReadOnlyMapping", "ReadOnlySet", "read_only"]

T = TypeVar("T")

_ROOT = "tool_context"

# What a value read through a view becomes, decided once per type.
_PLAIN, _MAPPING, _LIST, _SET, _TUPLE, _VIEW = range(6)
_KINDS: dict[type, int] = {
    t: _PLAIN for t in (str, int, float, bool, bytes, type(None), complex, frozenset, range)
}


def _kind(value: object) -> int:
    cls = type(value)
    kind = _KINDS.get(cls)
    if kind is None:
        if issubclass(cls, ReadOnlyMapping | ReadOnlyList | ReadOnlySet):
            kind = _VIEW
        elif issubclass(cls, Mapping):
            kind = _MAPPING
        elif issubclass(cls, list | MutableSequence):
            kind = _LIST
        elif issubclass(cls, set | MutableSet):
            kind = _SET
        elif issubclass(cls, tuple):
            kind = _TUPLE
        else:
            kind = _PLAIN  # any other object (a client, a connection) is handed over as it is
        _KINDS[cls] = kind
    return kind


def _wrap(value: Any, path: tuple[Any, ...]) -> Any:
    kind = _kind(value)
    if kind in (_PLAIN, _VIEW):
        return value
    if kind == _MAPPING:
        return ReadOnlyMapping(value, path)
    if kind == _LIST:
        return ReadOnlyList(value, path)
    if kind == _SET:
        return ReadOnlySet(value, path)
    # A tuple cannot change, but what it holds may: its containers are wrapped.
    if all(_kind(item) in (_PLAIN, _VIEW) for item in value):
        return value
    return tuple(_wrap(item, (*path, i)) for i, item in enumerate(value))


def _where(path: tuple[Any, ...]) -> str:
    return _ROOT + "".join(f"[{key!r}]" for key in path)


def _items(count: int) -> str:
    return f"{count} item" if count == 1 else f"{count} items"


def _refuse(path: tuple[Any, ...], what: str) -> NoReturn:
    raise ToolContextReadOnlyError(
        f"{_where(path)} is read-only: a tool cannot {what}. The tool_context is the caller's "
        "static channel; change the agent's metadata by returning a ContextUpdate, or work on "
        "a copy (dict(ctx.tool_context), list(...))",
        path=_where(path),
    )


@overload
def read_only(value: None) -> None: ...
@overload
def read_only(value: T) -> T: ...
def read_only(value: Any) -> Any:
    """What a tool sees of ``value``: a deep read-only view of a mapping, anything else as is.

    A view passed again is returned unchanged, so wrapping is idempotent.
    """
    if value is None or type(value) is ReadOnlyMapping:
        return value
    if _kind(value) == _MAPPING:
        return ReadOnlyMapping(value, ())
    return value


class ReadOnlyMapping(Mapping[Any, Any]):
    """A read-only view of a mapping; nested dicts, lists and sets are read-only views too.

    Writing (``view[key] = ...``, ``del``, ``pop``, ``update``, ``setdefault``, ``clear``)
    raises `ToolContextReadOnlyError` naming the key. ``dict(view)`` is a mutable shallow copy.
    """

    __slots__ = ("_data", "_path")

    def __init__(self, data: Mapping[Any, Any], path: tuple[Any, ...] = ()) -> None:
        self._data = data
        self._path = path

    def __getitem__(self, key: Any) -> Any:
        data = self._data
        # A defaultdict's (or Counter's) lookup of a missing key would insert it.
        if type(data) is not dict and key not in data:
            raise KeyError(key)
        value = data[key]
        if _KINDS.get(type(value)) == _PLAIN:
            return value
        return _wrap(value, (*self._path, key))

    def __iter__(self) -> Iterator[Any]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __repr__(self) -> str:
        # Keys only: the values may be secrets.
        return f"<read-only {_where(self._path)}: keys {list(self._data)!r}>"

    def __setitem__(self, key: Any, value: Any) -> NoReturn:
        _refuse((*self._path, key), "set a key")

    def __delitem__(self, key: Any) -> NoReturn:
        _refuse((*self._path, key), "delete a key")

    def __ior__(self, other: Any) -> NoReturn:
        _refuse(self._path, "update it")

    def pop(self, key: Any, *default: Any) -> NoReturn:
        _refuse((*self._path, key), "pop a key")

    def popitem(self) -> NoReturn:
        _refuse(self._path, "pop an item")

    def setdefault(self, key: Any, default: Any = None) -> NoReturn:
        _refuse((*self._path, key), "set a key")

    def update(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse(self._path, "update it")

    def clear(self) -> NoReturn:
        _refuse(self._path, "clear it")


class ReadOnlyList(Sequence[Any]):
    """A read-only view of a list (or another mutable sequence) inside a tool_context."""

    __slots__ = ("_data", "_path")

    def __init__(self, data: Sequence[Any], path: tuple[Any, ...] = ()) -> None:
        self._data = data
        self._path = path

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> ReadOnlyList: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return ReadOnlyList(list(self._data[index]), self._path)
        return _wrap(self._data[index], (*self._path, index))

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self) -> Iterator[Any]:
        path = self._path
        for i, item in enumerate(self._data):
            yield _wrap(item, (*path, i))

    def __contains__(self, item: object) -> bool:
        return item in self._data

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ReadOnlyList):
            other = other._data
        if isinstance(other, list | tuple):
            return len(self._data) == len(other) and all(
                a == b for a, b in zip(self, other, strict=True)
            )
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # like the list it shows

    def __repr__(self) -> str:
        return f"<read-only {_where(self._path)}: a list of {_items(len(self._data))}>"

    def __setitem__(self, index: Any, value: Any) -> NoReturn:
        _refuse(self._path, "change an item")

    def __delitem__(self, index: Any) -> NoReturn:
        _refuse(self._path, "delete an item")

    def __iadd__(self, other: Any) -> NoReturn:
        _refuse(self._path, "extend it")

    def __imul__(self, other: Any) -> NoReturn:
        _refuse(self._path, "repeat it")

    def append(self, item: Any) -> NoReturn:
        _refuse(self._path, "append to it")

    def extend(self, items: Iterable[Any]) -> NoReturn:
        _refuse(self._path, "extend it")

    def insert(self, index: int, item: Any) -> NoReturn:
        _refuse(self._path, "insert into it")

    def remove(self, item: Any) -> NoReturn:
        _refuse(self._path, "remove from it")

    def pop(self, index: int = -1) -> NoReturn:
        _refuse(self._path, "pop from it")

    def clear(self) -> NoReturn:
        _refuse(self._path, "clear it")

    def sort(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse(self._path, "sort it in place")

    def reverse(self) -> NoReturn:
        _refuse(self._path, "reverse it in place")


class ReadOnlySet(AbstractSet[Any]):
    """A read-only view of a set inside a tool_context.

    Set algebra gives new frozensets (so ``tags |= {...}`` rebinds a name, changing nothing).
    """

    __slots__ = ("_data", "_path")

    def __init__(self, data: AbstractSet[Any], path: tuple[Any, ...] = ()) -> None:
        self._data = data
        self._path = path

    @classmethod
    def _from_iterable(cls, it: Iterable[Any]) -> frozenset[Any]:
        return frozenset(it)

    def __contains__(self, item: object) -> bool:
        return item in self._data

    def __iter__(self) -> Iterator[Any]:
        return iter(self._data)  # set items are hashable: nothing inside them to wrap

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"<read-only {_where(self._path)}: a set of {_items(len(self._data))}>"

    def add(self, item: Any) -> NoReturn:
        _refuse(self._path, "add to it")

    def discard(self, item: Any) -> NoReturn:
        _refuse(self._path, "discard from it")

    def remove(self, item: Any) -> NoReturn:
        _refuse(self._path, "remove from it")

    def pop(self) -> NoReturn:
        _refuse(self._path, "pop from it")

    def clear(self) -> NoReturn:
        _refuse(self._path, "clear it")

    def update(self, *others: Any) -> NoReturn:
        _refuse(self._path, "update it")
