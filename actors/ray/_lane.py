"""`Lane`: one caller's inputs to one agent host, applied there in the order they were sent.

An agent host is an async Ray actor, and Ray keeps no order among the calls of an async actor,
even from one caller: it sends each call as soon as its arguments are ready and starts it as
soon as it arrives (only a synchronous, single-threaded actor runs one caller's calls in
order). A run, a steer and a cancel sent one after the other as three calls can reach the
agent's mailbox as run, cancel, steer.

A lane keeps the order on the sending side. It has at most one call in flight to its host;
what is put meanwhile waits, and goes as one batch in the next call when that one returns.
The host applies a batch in order without awaiting in between (`actors.ray._inbox.deliver`)
and answers once it is applied: a lane's call only enqueues (a question's answer comes with
it, when the agent gives it at once). What an input starts ends later -- a run's end -- and
comes back through the host's outbox, read by a pull of its own (`OutboxReader`): a steer
never waits for a run to end.

Nothing about the order is kept on the host, so a host that restarts has no counters to lose.
When a call fails because its host died, its entries cannot know whether they were applied,
and each decides (`Entry.lost`): a run ends with `HostLostError`, a question is asked again. A
batch sent after the lane saw its host fail never reached the process that died (Ray queues
calls to a restarting actor), so it goes again, unchanged and still first, for at most
``restart_wait`` seconds. An entry that asks to go again (`Entry.replied` and `Entry.lost`
return True: the restarted host no longer holds its agent, say) is handed to ``retry`` on
``pool`` -- which may block, to activate the agent -- and what that returns is put back at the
head of the lane, before anything sent after it.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from actors._logging import get_logger
from actors.exceptions import AgentStoppedError
from actors.host import settle

__all__ = ["MAX_BATCH", "RESEND_DELAY", "RESTART_WAIT", "Entry", "Lane", "host_gone"]

_log = get_logger("actors.ray")

MAX_BATCH = 256
"""At most this many inputs go in one call."""

RESTART_WAIT = 30.0
"""Seconds a lane (or a call) waits for a host that died to come back."""

RESEND_DELAY = 0.2
"""Seconds between sends of a batch to a host that is restarting (nothing to wait on)."""


def host_gone(error: BaseException) -> bool:
    """Whether ``error`` says a call's host died (or is unreachable), not that it refused."""
    from ray.exceptions import RayActorError

    return isinstance(error, RayActorError)


class Entry(Protocol):
    """One input of a lane, and what its sender does with the host's answers.

    The lane calls these from Ray's callback threads (and ``sent`` from the putter's): an
    entry guards its own state.
    """

    @property
    def message(self) -> Any:
        """What travels to the host (frozen, picklable)."""
        ...

    def sent(self) -> None:
        """Its call was submitted (again, after a host restart): start reading what it ends."""

    def replied(self, reply: Any) -> bool:
        """The host's answer; True to go again (through the lane's ``retry``)."""
        ...

    def lost(self, error: BaseException) -> bool:
        """Its call failed (``error``): it may or may not have been applied. True: go again."""
        ...


Call = Callable[[tuple[Any, ...]], concurrent.futures.Future[Any]]
Retry = Callable[[list[Any]], Sequence[Any]]


def _asks(hook: Callable[[Any], bool], value: Any) -> bool:
    """``hook(value)``; an entry that fails is logged, and the lane goes on without it."""
    try:
        return hook(value)
    except Exception:
        _log.exception("an entry of a lane failed handling its answer")
        return False


class _Barrier:
    """A place in the lane: set once everything put before it was answered."""

    __slots__ = ("future",)

    def __init__(self) -> None:
        self.future: concurrent.futures.Future[None] = concurrent.futures.Future()


class Lane:
    """The ordered way from one caller to one host (see the module docstring).

    Args:
        call: Submits one batch of messages to the host; its future holds the host's answers,
            one per message, or the error of the call.
        retry: Takes the entries that asked to go again and returns what to put back in
            their place, in order (it may block); None puts them back as they are.
        pool: Where ``retry`` runs (never on a Ray callback thread); needed with ``retry``.
        restart_wait: How long a batch is sent again to a host that is restarting.
        resend_delay: Seconds between those sends.
        gone: Tells a call's error that means the host died from any other error.
    """

    def __init__(
        self,
        call: Call,
        *,
        retry: Retry | None = None,
        pool: concurrent.futures.Executor | None = None,
        restart_wait: float = RESTART_WAIT,
        resend_delay: float = RESEND_DELAY,
        gone: Callable[[BaseException], bool] = host_gone,
    ) -> None:
        if retry is not None and pool is None:
            raise ValueError("a lane with a retry needs a pool to run it on")
        self._call = call
        self._retry = retry
        self._pool = pool
        self._restart_wait = restart_wait
        self._resend_delay = resend_delay
        self._gone = gone
        self._lock = threading.Lock()
        self._queue: deque[Any] = deque()  # entries and barriers, in order
        self._busy = False  # a call is in flight, or its answers are being handled
        self._failing_since: float | None = None  # the host was seen failing, not answering since

    # -- what callers use -----------------------------------------------------------------------

    def put(self, entry: Entry) -> None:
        """Send ``entry`` after everything put before it (now, or with the next call)."""
        with self._lock:
            self._queue.append(entry)
            if self._busy:
                return
            self._busy = True
        self._next()

    def drained(self) -> concurrent.futures.Future[None]:
        """A future set once everything put so far was answered (or given up on)."""
        barrier = _Barrier()
        with self._lock:
            if not self._busy:
                settle(barrier.future)
                return barrier.future
            self._queue.append(barrier)
        return barrier.future

    def host_failed(self) -> None:
        """Another call to the host (a pull) failed: the host is restarting, or gone."""
        with self._lock:
            if self._failing_since is None:
                self._failing_since = time.monotonic()

    # -- the one call in flight -----------------------------------------------------------------

    def _next(self) -> None:
        """Send the next batch, or go idle; only the owner of ``_busy`` calls it."""
        passed: list[_Barrier] = []
        with self._lock:
            while self._queue and isinstance(self._queue[0], _Barrier):
                passed.append(self._queue.popleft())
            batch: list[Any] = []
            while self._queue and len(batch) < MAX_BATCH:
                if isinstance(self._queue[0], _Barrier):
                    break  # it waits for the answers to this batch
                batch.append(self._queue.popleft())
            if not batch:
                self._busy = False
            failing = self._failing_since is not None
        for barrier in passed:
            settle(barrier.future)
        if batch:
            self._send(batch, failing)

    def _send(self, batch: list[Any], failing: bool) -> None:
        try:
            future = self._call(tuple(entry.message for entry in batch))
        except Exception as exc:  # it could not even leave (a message that does not pickle)
            _log.exception("a batch could not be sent to its host")
            self._handle_lost(batch, exc)
            return
        for entry in batch:
            try:
                entry.sent()
            except Exception:
                _log.exception("an entry of a lane failed to start reading its end")
        future.add_done_callback(lambda done: self._done(batch, done, failing))

    def _done(self, batch: list[Any], done: concurrent.futures.Future[Any], failing: bool) -> None:
        error = done.exception()
        if error is None:
            with self._lock:
                self._failing_since = None
            replies = done.result()
            if not isinstance(replies, list | tuple) or len(replies) != len(batch):
                # A host of another version: nothing to match the entries with.
                self._handle_lost(batch, RuntimeError(f"the host answered {replies!r}"))
                return
            self._again(
                [e for e, reply in zip(batch, replies, strict=True) if _asks(e.replied, reply)]
            )
            return
        gone = self._gone(error)
        if gone:
            now = time.monotonic()
            with self._lock:
                since = self._failing_since
                if since is None:
                    self._failing_since = now
            if failing and since is not None and now - since < self._restart_wait:
                # Sent after the host was seen failing: it never reached the process that
                # died. Ray queues calls to a restarting actor; send it again, still first.
                self._put_back(batch, delay=self._resend_delay)
                return
        self._handle_lost(batch, error)

    def _handle_lost(self, batch: list[Any], error: BaseException) -> None:
        self._again([entry for entry in batch if _asks(entry.lost, error)])

    def _again(self, entries: list[Any]) -> None:
        if not entries:
            self._next()
        elif self._retry is None:
            self._put_back(entries)
        else:
            assert self._pool is not None
            try:
                self._pool.submit(self._retried, entries)
            except RuntimeError:  # the pool is shut down: the caller is closing
                stopped = AgentStoppedError("the runtime was shut down before this was sent again")
                for entry in entries:  # each one's caller hears it; none goes again
                    _asks(entry.lost, stopped)
                self._next()

    def _retried(self, entries: list[Any]) -> None:
        assert self._retry is not None
        try:
            replaced = list(self._retry(entries))
        except Exception as exc:
            # Nobody is left waiting: each entry hears the error, and does not go again.
            _log.exception("entries of a lane could not be sent again")
            for entry in entries:
                _asks(entry.lost, exc)
            replaced = []
        self._put_back(replaced)

    def _put_back(self, entries: Sequence[Any], delay: float = 0.0) -> None:
        with self._lock:
            self._queue.extendleft(reversed(entries))
        if delay <= 0:
            self._next()
            return
        timer = threading.Timer(delay, self._next)
        timer.daemon = True
        timer.start()
