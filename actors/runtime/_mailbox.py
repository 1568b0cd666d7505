"""Pooled mailboxes: many actors, a few threads.

An agent's handlers never block (DESIGN.md, invariant 2), so an agent needs a thread only while
it has messages to handle. A `Mailbox` is a pykka actor inbox that, when a message arrives for
an actor with nothing queued, puts the actor on the `Dispatcher`'s run queue; a worker then
drains at most ``batch`` messages of it and sends it to the back of the queue if more wait, so
one busy actor cannot starve the others. At most one worker runs a mailbox at a time, so each
actor still sees its messages one by one, in order.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections import deque
from typing import TYPE_CHECKING, Any, Protocol

import pykka

from actors._logging import get_logger

if TYPE_CHECKING:
    from pykka._envelope import Envelope

__all__ = ["Dispatcher", "Mailbox", "MailboxOwner"]

_log = get_logger("actors.runtime")

_IDLE, _SCHEDULED, _CLOSED = 0, 1, 2
_names = itertools.count(1)


class MailboxOwner(Protocol):
    """The actor a mailbox runs: it handles one envelope at a time."""

    def _actors_receive(self, envelope: Envelope[Any]) -> bool:
        """Handle one envelope; return False once the actor has stopped."""
        ...


class Mailbox:
    """A pykka inbox whose messages are handled on a `Dispatcher`'s workers."""

    __slots__ = ("_dispatcher", "_items", "_lock", "_owner", "_state")

    def __init__(self, dispatcher: Dispatcher) -> None:
        self._dispatcher = dispatcher
        self._items: deque[Envelope[Any]] = deque()
        self._lock = threading.Lock()
        self._state = _IDLE
        self._owner: MailboxOwner | None = None

    def bind(self, owner: MailboxOwner) -> None:
        """Attach the actor whose messages these are (once, before any message is handled)."""
        self._owner = owner
        with self._lock:
            if self._items and self._state == _IDLE:
                self._state = _SCHEDULED
                schedule = True
            else:
                schedule = False
        if schedule:
            self._dispatcher.schedule(self)

    # -- pykka's inbox protocol ---------------------------------------------------------------

    def put(self, envelope: Envelope[Any], /) -> None:
        """Queue a message; schedule the actor if it had nothing queued."""
        with self._lock:
            state = self._state
            if state != _CLOSED:
                self._items.append(envelope)
                if state == _SCHEDULED or self._owner is None:
                    return
                self._state = _SCHEDULED
        if state == _CLOSED:
            _refuse(envelope)
            return
        self._dispatcher.schedule(self)

    def get(self) -> Envelope[Any]:
        """The oldest message (pykka's protocol; workers use `run`)."""
        with self._lock:
            return self._items.popleft()

    def empty(self) -> bool:
        """Whether no message is queued."""
        return not self._items

    # -- the worker's side --------------------------------------------------------------------

    def run(self, batch: int) -> None:
        """Handle up to ``batch`` messages, then give the worker back."""
        owner = self._owner
        assert owner is not None
        for _ in range(batch):
            with self._lock:
                if not self._items:
                    self._state = _IDLE
                    return
                envelope = self._items.popleft()
            if not owner._actors_receive(envelope):
                self.close()
                return
        with self._lock:
            if not self._items:
                self._state = _IDLE
                return
        self._dispatcher.schedule(self)  # to the back of the queue: others get a turn

    def close(self) -> None:
        """The actor stopped: refuse what is queued and whatever comes later."""
        with self._lock:
            self._state = _CLOSED
            left = list(self._items)
            self._items.clear()
        for envelope in left:
            _refuse(envelope)


def _refuse(envelope: Envelope[Any]) -> None:
    """Answer a message its actor will never handle (a stop is answered as done)."""
    reply = envelope.reply_to
    if reply is None:
        return
    try:
        if isinstance(envelope.message, pykka.messages._ActorStop):
            reply.set(None)
        else:
            error = pykka.ActorDeadError("the actor stopped before handling the message")
            reply.set_exception(exc_info=(pykka.ActorDeadError, error, None))
    except queue.Full:  # answered already
        pass


class _Worker:
    """One worker thread's parking spot: a lock it blocks on while idle."""

    __slots__ = ("gate", "task")

    def __init__(self) -> None:
        self.gate = threading.Lock()
        self.gate.acquire()  # held: the worker blocks on it until given a task
        self.task: Mailbox | None = None


class Dispatcher:
    """A fixed pool of worker threads that run mailboxes with messages waiting.

    Idle workers wait on a stack: a mailbox with messages goes to the worker that went idle
    last (its thread is the warmest: on a small machine that halves a message's round trip
    against waking the coldest), else to the back of the run queue.

    The workers are daemon threads: the runtime stops its actors at exit, and a worker never
    holds a thread the interpreter has to join.

    Args:
        workers: Worker threads.
        batch: Messages one mailbox may handle before the others get a turn.
        name: The threads' name prefix.
    """

    def __init__(self, workers: int, *, batch: int = 8, name: str = "actors-worker") -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self._batch = batch
        self._lock = threading.Lock()
        self._queue: deque[Mailbox] = deque()
        self._idle: list[_Worker] = []
        self._closed = False
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{next(_names)}", daemon=True)
            for _ in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    @property
    def workers(self) -> int:
        """How many worker threads run mailboxes."""
        return len(self._threads)

    def schedule(self, mailbox: Mailbox) -> None:
        """Give a mailbox with messages to an idle worker, or queue it."""
        with self._lock:
            if not self._idle:
                self._queue.append(mailbox)
                return
            worker = self._idle.pop()
            worker.task = mailbox
        worker.gate.release()

    def _next(self, worker: _Worker) -> Mailbox | None:
        """The next mailbox to run, waiting idle for one; None when closed."""
        with self._lock:
            if self._queue:
                return self._queue.popleft()
            if self._closed:
                return None
            self._idle.append(worker)
        worker.gate.acquire()
        task, worker.task = worker.task, None
        return task

    def _work(self) -> None:
        batch, me = self._batch, _Worker()
        while True:
            mailbox = self._next(me)
            if mailbox is None:
                return
            try:
                mailbox.run(batch)
            except Exception:  # a worker must survive anything an actor lets through
                _log.exception("a mailbox failed outside its actor's own error handling")
            # An idle worker must not keep the last agent it ran (and its tool_context) alive.
            del mailbox

    def close(self, timeout: float = 5.0) -> None:
        """Stop the workers once the mailboxes queued before now have run."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.gate.release()  # with no task: it returns
        current = threading.current_thread()
        for thread in self._threads:
            if thread is not current:
                thread.join(timeout)
