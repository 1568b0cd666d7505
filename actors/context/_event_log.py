"""An agent's log as it is kept: plain records, made `Event` objects when someone reads them.

An agent appends about nine events a step, and most are never read as objects while it runs:
they are folded into the projections as they are appended, and read again only when someone
asks (a store writing them, a subscriber, a stream, a trace, a `RunResult` looked into). So
the log keeps each as a record, a tuple ``(seq, type, data, created_at)``, and turns a record
into its `Event` the first time it is read, in place: every later reader gets that same
object. A record is a fifth of an `Event` in memory and costs a tenth as much to make.

`EventView` is what a `RunResult` holds: a run's stretch of the log, read on demand. Like
`MessageView`, it compares equal to a tuple or list of the same events and pickles as a tuple.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any, overload

from actors.context._events import Event
from actors.context._unchecked import SetFields, unchecked

__all__ = [
    "EventView",
    "Record",
    "consumers_changed",
    "event_at",
    "event_of",
    "materialize",
    "publishing",
]

Record = tuple[int, str, dict[str, Any], datetime]
"""(seq, type, data, created_at): an event as the log keeps it until it is read."""

_FIELDS = SetFields(Event.model_fields)


class _Epoch:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0


publishing = _Epoch()
"""Changes whenever what takes events may have changed anywhere in the process (a subscriber,
a stream, a tracer): a host that decided an agent's events go nowhere decides again."""
_epochs = itertools.count(1)


def consumers_changed() -> None:
    """Say that a subscriber, a stream or a tracer came or went (any thread)."""
    publishing.value = next(_epochs)  # a new value each time, even from two threads at once


def event_of(record: Record) -> Event:
    """The `Event` of a record (whose every field the log made and checked itself)."""
    seq, kind, data, created_at = record
    values = {"seq": seq, "type": kind, "data": data, "created_at": created_at}
    return unchecked(Event, values, _FIELDS)


_making = threading.Lock()  # two threads reading one record make one Event, not two


def event_at(items: list[Any], index: int) -> Event:
    """The event at ``index``, made from its record (in place) if no one read it before."""
    item = items[index]
    if type(item) is tuple:
        with _making:
            item = items[index]
            if type(item) is tuple:
                item = items[index] = event_of(item)
    return item  # type: ignore[no-any-return]


def materialize(items: list[Any], start: int, stop: int) -> None:
    """Turn the records among ``items[start:stop]`` into their events, in place."""
    for index in range(start, stop):
        if type(items[index]) is tuple:
            event_at(items, index)


class EventView(Sequence[Event]):
    """An immutable stretch of an agent's log, ``[start, stop)``, read when it is looked at.

    The log only ever grows at its end and a record only ever becomes its event, so the view
    never changes. It compares equal to any sequence (a tuple, a list, another view) holding
    equal events, and pickles as a tuple. Slicing gives a tuple.
    """

    __slots__ = ("_items", "_start", "_stop")

    def __init__(self, items: list[Any], start: int = 0, stop: int | None = None) -> None:
        self._items = items
        self._stop = len(items) if stop is None else stop
        self._start = min(max(start, 0), self._stop)

    def _events(self) -> tuple[Event, ...]:
        materialize(self._items, self._start, self._stop)
        return tuple(self._items[self._start : self._stop])

    def __len__(self) -> int:
        return self._stop - self._start

    @overload
    def __getitem__(self, index: int) -> Event: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Event, ...]: ...

    def __getitem__(self, index: int | slice) -> Event | tuple[Event, ...]:
        if isinstance(index, slice):
            return self._events()[index]
        size = len(self)
        position = index + size if index < 0 else index
        if not 0 <= position < size:
            raise IndexError("event index out of range")
        return event_at(self._items, position + self._start)

    def __iter__(self) -> Iterator[Event]:
        return iter(self._events())

    def __reversed__(self) -> Iterator[Event]:
        return reversed(self._events())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, EventView | tuple | list):
            return len(self) == len(other) and self._events() == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._events())

    def __add__(self, other: Sequence[Event]) -> tuple[Event, ...]:
        return (*self._events(), *other)

    def __radd__(self, other: Sequence[Event]) -> tuple[Event, ...]:
        return (*other, *self._events())

    def __reduce__(self) -> tuple[Any, ...]:
        # Crossing a process (Ray pickles results) or a deep copy: a plain tuple.
        return (tuple, (self._events(),))

    def __repr__(self) -> str:
        return f"EventView({list(self._events())!r})"
