"""Outboxes: what a host holds for a caller to fetch (stream events, subscribed events, ends).

The driver is not a Ray actor, so a host cannot call it. It asks instead: each pull is a call
that returns as soon as the outbox holds something (a long poll), and the caller asks again
(`OutboxReader`). A closed outbox ends with a `Closed` item, after everything put before it:
the end of a run, the answer to a question, a child's `ChildEnd`.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from actors._logging import get_logger
from actors.host import RunEnded, StreamEvent, TreeStream, settle

__all__ = ["Closed", "Outbox", "OutboxReader", "OutboxStream"]

_log = get_logger("actors.ray")

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


class OutboxReader:
    """A caller's side of one outbox: pulls until it closes, or its host fails.

    Args:
        pull: Submits one pull of the outbox; returns the call's Ray ObjectRef.
        put: Takes each item before the `Closed` one (stream events), or None.
        closed: Takes what the outbox closed with.
        failed: Takes the error of a pull that failed (its host died, or it was cancelled).
    """

    def __init__(
        self,
        pull: Callable[[], Any],
        closed: Callable[[Any], None],
        failed: Callable[[BaseException], None],
        put: Callable[[Any], None] | None = None,
    ) -> None:
        self._pull = pull
        self._put = put
        self._closed = closed
        self._failed = failed
        self._lock = threading.Lock()
        self._ref: Any = None
        self._stopped = False

    def start(self) -> None:
        """Send the first pull."""
        self._ask()

    def cancel(self) -> None:
        """Stop reading; a pull in flight is cancelled (its host drops the outbox)."""
        import ray

        with self._lock:
            self._stopped = True
            ref, self._ref = self._ref, None
        if ref is not None:
            try:
                ray.cancel(ref)
            except Exception:  # the call ended meanwhile, or its host is gone
                _log.debug("a pull could not be cancelled", exc_info=True)

    def _ask(self) -> None:
        with self._lock:
            if self._stopped:
                return
            ref = self._ref = self._pull()
        ref.future().add_done_callback(self._got)

    def _got(self, done: concurrent.futures.Future[Any]) -> None:
        error = done.exception()
        if error is not None:
            with self._lock:
                stopped, self._stopped = self._stopped, True
            if not stopped:
                self._failed(error)
            return
        for item in done.result():
            if isinstance(item, Closed):
                with self._lock:
                    self._stopped = True
                self._closed(item.outcome)
                return
            if self._put is not None:
                try:
                    self._put(item)
                except Exception:
                    _log.exception("an outbox item could not be handed over")
        self._ask()
