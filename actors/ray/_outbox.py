"""Outboxes: what a host holds for the driver to fetch (stream events, subscribed events).

The driver is not a Ray actor, so a host cannot call it. It asks instead: each pull is a call
that returns as soon as the outbox holds something (a long poll), and the driver asks again.
A closed outbox ends with a `Closed` item, after everything put before it.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

from actors.runtime._host import settle
from actors.runtime._stream import RunEnded, StreamEvent, TreeStream

__all__ = ["Closed", "Outbox", "OutboxStream"]

MAX_BATCH = 512


@dataclass(frozen=True, slots=True)
class Closed:
    """The last item of an outbox; ``outcome`` is a streamed run's `Outcome`, if any."""

    outcome: Any = None


class Outbox:
    """Items put from any thread, taken in batches by one puller."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: deque[Any] = deque()
        self._waiter: concurrent.futures.Future[None] | None = None
        self.closed = False

    def put(self, item: Any) -> None:
        """Add an item (dropped once the outbox is closed)."""
        with self._lock:
            if self.closed:
                return
            self._items.append(item)
            waiter, self._waiter = self._waiter, None
        if waiter is not None:
            settle(waiter)

    def close(self, outcome: Any = None) -> None:
        """Put the last item."""
        with self._lock:
            if self.closed:
                return
            self._items.append(Closed(outcome))
            self.closed = True
            waiter, self._waiter = self._waiter, None
        if waiter is not None:
            settle(waiter)

    @property
    def finished(self) -> bool:
        """Whether it is closed and everything in it was taken."""
        with self._lock:
            return self.closed and not self._items

    def take(self) -> tuple[list[Any], concurrent.futures.Future[None] | None]:
        """What is there (up to a batch), or a future that is set when something comes."""
        with self._lock:
            if self._items:
                count = min(len(self._items), MAX_BATCH)
                return [self._items.popleft() for _ in range(count)], None
            self._waiter = concurrent.futures.Future()
            return [], self._waiter


class OutboxStream(TreeStream):
    """A `TreeStream` whose events go to an outbox instead of a reader in this process."""

    def __init__(self, outbox: Outbox) -> None:
        super().__init__()
        self.outbox = outbox

    def put(self, event: StreamEvent) -> None:
        """Hand one event to the driver."""
        self.outbox.put(event)

    def end(self, event: RunEnded) -> None:
        """Not used: the host closes the outbox with the run's outcome."""
