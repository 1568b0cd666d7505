"""`Agenda`: an inline host's messages, taken in (time, sequence) order, cheaply when due now.

A heap of (time, sequence, agent id, message) gives the order, at a cost of a sift through
log n tuples on every pop. Nearly every message an inline host queues is due now (a model's
reply with no latency, a tool's outcome, a peer message with no delay): those wait in a FIFO
instead, which their rising sequence numbers keep in order, and the heap holds only what is
due later. Taking the smaller head of the two gives exactly the heap's order.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from typing import Any

__all__ = ["Agenda", "Item"]

Item = tuple[float, int, str, Any]
"""(time, sequence, agent id, message): the agent id is "" for a world call."""


class Agenda:
    """Items in (time, sequence) order; the sequence is given here, in order of arrival."""

    __slots__ = ("_later", "_now", "_seq")

    def __init__(self) -> None:
        self._later: list[Item] = []  # a heap
        self._now: deque[Item] = deque()  # one time, rising sequence numbers
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._now) + len(self._later)

    def push(self, when: float, agent_id: str, message: Any, now: float) -> None:
        """Queue ``message`` for ``agent_id`` at ``when`` (``now`` is the host's time)."""
        item = (when, next(self._seq), agent_id, message)
        due = self._now
        if when == now and (not due or due[-1][0] == when):
            due.append(item)
        else:
            heapq.heappush(self._later, item)

    def first_time(self) -> float | None:
        """The time of the next item, or None if there is none."""
        due, later = self._now, self._later
        if due and (not later or due[0] < later[0]):
            return due[0][0]
        return later[0][0] if later else None

    def pop(self) -> Item | None:
        """Take the next item (None if there is none)."""
        due, later = self._now, self._later
        if due and (not later or due[0] < later[0]):
            return due.popleft()
        return heapq.heappop(later) if later else None
