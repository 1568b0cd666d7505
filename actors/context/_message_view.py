"""An immutable view of a transcript that costs the same at 10 messages as at 10,000.

An agent's transcript only grows at its end, except when a ``replace`` event shadows a range.
So the context keeps its messages in a list it only ever appends to, and swaps in a new list
(copy on write) when a replace event changes a position. A view is then a reference to that
list and a length: taking one is O(1), later appends do not show in it, and it never changes.
Every model request and every `RunResult` holds one instead of a copy of the whole transcript.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any, overload

from actors.context._messages import Message

__all__ = ["MessageView", "new_log_id"]

_log_ids = itertools.count(1)


def new_log_id() -> int:
    """A number no other transcript of this process has (names the list a view reads)."""
    return next(_log_ids)


class MessageView(Sequence[Message]):
    """An immutable sequence of messages: a prefix of a transcript, optionally with a new head.

    It compares equal to any sequence (a tuple, a list, another view) holding equal messages,
    and pickles as a tuple. Slicing gives a tuple.
    """

    __slots__ = ("_head", "_items", "_origin", "_skip", "_stop")

    def __init__(
        self,
        items: Sequence[Message],
        stop: int | None = None,
        *,
        head: Message | None = None,
        skip_first: bool = False,
        origin: tuple[int, int] | None = None,
    ) -> None:
        self._items = items
        self._stop = len(items) if stop is None else stop
        self._head = head
        self._skip = 1 if skip_first and self._stop > 0 else 0
        # (log id, generation) of the list, when the list is a transcript's append-only list.
        self._origin = origin

    @property
    def head(self) -> Message | None:
        """The message shown in front of (or instead of the first of) the transcript's."""
        return self._head

    @property
    def hidden(self) -> Message | None:
        """The transcript's first message when `head` stands in for it, else None."""
        return self._items[0] if self._skip else None

    @property
    def origin(self) -> tuple[int, int, int] | None:
        """Names the transcript prefix this view shows: (log id, generation, length).

        Two views with the same log id and generation read the same append-only list, so the
        longer one holds the shorter one's transcript messages and more. None when the view
        is not of an agent's transcript.
        """
        if self._origin is None:
            return None
        return (*self._origin, self._stop)

    def transcript_since(self, start: int) -> Sequence[Message]:
        """The transcript's messages from position ``start`` on (no head, nothing hidden)."""
        return self._items[start : self._stop]  # a slice: islice would walk from position 0

    def with_head(self, head: Message, *, replace_first: bool) -> MessageView:
        """The same messages with ``head`` in front, or instead of the first one."""
        return MessageView(
            self._items,
            self._stop,
            head=head,
            skip_first=replace_first or self._skip == 1,
            origin=self._origin,
        )

    def __len__(self) -> int:
        return self._stop - self._skip + (self._head is not None)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Message, ...]: ...

    def __getitem__(self, index: int | slice) -> Message | tuple[Message, ...]:
        if isinstance(index, slice):
            return tuple(self)[index]
        size = len(self)
        position = index + size if index < 0 else index
        if not 0 <= position < size:
            raise IndexError("message index out of range")
        if self._head is not None:
            if position == 0:
                return self._head
            position -= 1
        return self._items[position + self._skip]

    def __iter__(self) -> Iterator[Message]:
        body = itertools.islice(self._items, self._skip, self._stop)
        if self._head is None:
            return body
        return itertools.chain((self._head,), body)

    def __reversed__(self) -> Iterator[Message]:
        for position in range(self._stop - 1, self._skip - 1, -1):
            yield self._items[position]
        if self._head is not None:
            yield self._head

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MessageView | tuple | list):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __add__(self, other: Sequence[Message]) -> tuple[Message, ...]:
        return (*self, *other)

    def __reduce__(self) -> tuple[Any, ...]:
        # Crossing a process (Ray pickles results) or a deep copy: a plain tuple.
        return (tuple, (tuple(self),))

    def __repr__(self) -> str:
        return f"MessageView({list(self)!r})"
