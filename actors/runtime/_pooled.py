"""`PooledActor`: a pykka actor without a thread of its own.

It is a real `pykka.Actor` (an `ActorRef`, ``tell``/``ask``, the `ActorRegistry`), built on
pykka's runtime hooks the way its threading actor is: the inbox is a `Mailbox` that runs on a
shared `Dispatcher`, futures are pykka's threading futures, and starting the actor starts no
thread. Messages are handled as pykka's own loop handles them: an ``ask`` gets the handler's
return value or exception; a stop answers the messages still queued with `ActorDeadError`.
"""

from __future__ import annotations

import sys
import threading
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pykka
from pykka import ActorRef, ActorRegistry

from actors.runtime._mailbox import Dispatcher, Mailbox

if TYPE_CHECKING:
    from pykka._actor import ActorInbox
    from pykka._envelope import Envelope

__all__ = ["STOP", "PooledActor", "unregister_all"]


class _Stopped:
    """``actor_stopped``: the flag pykka reads (``ActorRef.is_alive``).

    A `threading.Event` (a lock and a condition per actor) is made only for someone who waits.
    """

    __slots__ = ("_event", "_set")

    _lock = threading.Lock()

    def __init__(self) -> None:
        self._set = False
        self._event: threading.Event | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        with self._lock:
            self._set = True
            event = self._event
        if event is not None:
            event.set()

    def wait(self, timeout: float | None = None) -> bool:
        with self._lock:
            if self._set:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)


STOP = object()
"""Told (not asked) to stop an actor with no future to answer: a bulk stop's message."""


class PooledActor(pykka.Actor):
    """A pykka actor whose messages are handled on a shared pool of worker threads.

    Subclasses pass the `Dispatcher` to ``start`` through their constructor, which must call
    ``PooledActor.__init__(self, dispatcher)`` first.
    """

    actors_registry_bulk = False  # set when the host takes its actors out of the registry at once

    def __init__(self, dispatcher: Dispatcher) -> None:
        # pykka's own __init__ builds a threading.Event per actor; an idle agent should cost
        # as little as possible, so the same fields are set here with a lighter flag.
        self.actor_urn = uuid.uuid4().urn
        self.actor_inbox = Mailbox(dispatcher)
        self.actor_stopped = _Stopped()  # type: ignore[assignment]
        self._actor_ref = ActorRef(self)

    @staticmethod
    def _create_actor_inbox() -> ActorInbox:  # pragma: no cover - built in __init__
        raise NotImplementedError("a PooledActor's inbox is built by its constructor")

    @staticmethod
    def _create_future() -> pykka.Future[Any]:
        return pykka.ThreadingFuture()

    def _start_actor_loop(self) -> None:
        # No thread: the mailbox runs on the dispatcher from the first message on.
        try:
            self.on_start()
        except Exception:
            self._handle_failure(*sys.exc_info())
            self._close_inbox()
            return
        inbox = self.actor_inbox
        assert isinstance(inbox, Mailbox)
        inbox.bind(self)

    def _close_inbox(self) -> None:
        inbox = self.actor_inbox
        if isinstance(inbox, Mailbox):
            inbox.close()

    def _stop(self) -> None:
        # As pykka's, but the registry may be left to `unregister_all`: removing one ref from
        # pykka's registry list scans it, so stopping 100,000 actors one by one is quadratic.
        if not self.actors_registry_bulk:
            ActorRegistry.unregister(self.actor_ref)
        self.actor_stopped.set()
        try:
            self.on_stop()
        except Exception:
            self._handle_failure(*sys.exc_info())

    def _actors_receive(self, envelope: Envelope[Any]) -> bool:
        """Handle one message as pykka's actor loop does; False once the actor stopped."""
        if self.actor_stopped.is_set():
            return False
        if envelope.message is STOP:
            self._stop()
            return False
        try:
            response = self._handle_receive(envelope.message)
            if envelope.reply_to is not None:
                envelope.reply_to.set(response)
        except Exception:
            if envelope.reply_to is not None:
                envelope.reply_to.set_exception()
            else:
                self._handle_failure(*sys.exc_info())
                try:
                    self.on_failure(*sys.exc_info())
                except Exception:
                    self._handle_failure(*sys.exc_info())
        return not self.actor_stopped.is_set()


def unregister_all(refs: Iterable[ActorRef[Any]]) -> None:
    """Take many actors out of pykka's registry in one pass (see `PooledActor._stop`)."""
    doomed = {id(ref) for ref in refs}
    if not doomed:
        return
    # pykka keeps its registry as a list under a lock; this is its one bulk edit.
    with ActorRegistry._actor_refs_lock:
        kept = [ref for ref in ActorRegistry._actor_refs if id(ref) not in doomed]
        ActorRegistry._actor_refs[:] = kept
