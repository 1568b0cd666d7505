"""`deliver`: a host applies the inputs of one lane call, in order, to its agents' mailboxes.

Each input goes into its agent's mailbox before the next is looked at, and nothing awaits or
blocks until all are in: one caller's inputs reach the agents in the order the caller sent
them (see `actors.ray._lane`). Each is answered -- `Taken`, `Missing`, or an `Outcome` with
the error that kept it out -- and what it starts ends in the host's outbox of its key: a run's
`Outcome` (after its stream events), a child's `ChildEnd`. A question is answered in its
agent's next turn, which comes at once unless the host is busy: `Delivery.answers` waits a
moment for it (`ANSWER_WAIT`) and sends the answer back with the call, saving its caller a
pull; a question not answered by then is `Taken`, and its answer goes to the outbox.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from actors.context._usage import Usage
from actors.exceptions import AgentStoppedError, HostLostError
from actors.host import Ask, HostReply, OpenStream, Query
from actors.loop._types import ResumeRun, StartRun
from actors.ray._inputs import (
    AskInput,
    ChildInput,
    ExpireInput,
    HostInput,
    PeerInput,
    RunInput,
    TellInput,
)
from actors.ray._outbox import OutboxStream
from actors.ray._wire import ChildEnd, Missing, Outcome, Taken, portable_error

if TYPE_CHECKING:
    from actors.ray._server import HostServer

__all__ = ["ANSWER_WAIT", "PEER_LOG_WAIT", "Delivery", "deliver"]

ANSWER_WAIT = 0.05
"""Seconds a lane's call waits for the answers to its questions before leaving them to pulls.

The lane waits as long (its next call goes after this one returns): a bound on how long a busy
agent's question holds up what its caller sends to the host next.
"""

PEER_LOG_WAIT = 10.0
"""Seconds a lane's call waits for its peer messages to be logged by their receivers.

A message not logged by then is answered `Taken`: its sender's host will not send it again.
"""

Reply = Taken | Outcome | Missing

_TAKEN = Taken()


class Delivery:
    """One lane call's inputs, applied: their answers, and the questions still out."""

    def __init__(self, server: HostServer) -> None:
        self.server = server
        self.replies: list[Reply] = []
        self._asked: dict[int, _Answer] = {}
        self._logging: dict[int, concurrent.futures.Future[Any]] = {}  # peer messages

    async def answers(self, timeout: float = ANSWER_WAIT) -> list[Reply]:
        """The replies, with the answers that came within ``timeout`` in place of `Taken`.

        Peer messages are answered once their receivers logged them (`PEER_LOG_WAIT`).
        """
        if self._logging:
            await self._logged()
        if not self._asked:
            return self.replies
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        left = len(self._asked)
        lock = threading.Lock()

        def one_more(_answer: _Answer) -> None:
            nonlocal left
            with lock:
                left -= 1
                if left:
                    return
            loop.call_soon_threadsafe(_wake, waiter)

        for answer in self._asked.values():
            answer.then(one_more)
        timer = loop.call_later(timeout, _wake, waiter)
        await waiter
        timer.cancel()
        for index, answer in self._asked.items():
            outcome = answer.claim()
            if outcome is not None:
                self.replies[index] = outcome
        return self.replies

    async def _logged(self) -> None:
        unique = {id(f): f for f in self._logging.values()}  # one per receiver
        waiting = [asyncio.wrap_future(f) for f in unique.values()]
        await asyncio.wait(waiting, timeout=PEER_LOG_WAIT)
        for waited in waiting:  # seen here, so asyncio does not report it as never retrieved
            if waited.done() and not waited.cancelled():
                waited.exception()
        for index, logged in self._logging.items():
            if logged.done() and (error := logged.exception()) is not None:
                self.replies[index] = Outcome(error=portable_error(error))

    def apply(self, item: HostInput) -> None:
        """Put one input in its agent's mailbox; its reply is added."""
        try:
            reply = self._apply(item)
        except AgentStoppedError:
            reply = Missing(getattr(item, "agent_id", ""))
        except Exception as exc:
            reply = Outcome(error=portable_error(exc))
        key = _key(item)
        if key is not None and not isinstance(reply, Taken):  # its reader ends too
            self.server.outbox(key).close(reply)
        self.replies.append(reply)

    def apply_peers(self, items: Sequence[PeerInput]) -> None:
        """Put peer messages in their receivers' mailboxes: each receiver's in one turn."""
        first = len(self.replies)
        self.replies.extend([_TAKEN] * len(items))
        by_receiver: dict[str, list[int]] = {}
        for index, item in enumerate(items):
            by_receiver.setdefault(item.to, []).append(index)
        mail = self.server.peers.mail
        for indexes in by_receiver.values():
            logged: concurrent.futures.Future[Any] | Missing | Outcome
            try:
                logged = mail.receive([items[i] for i in indexes])
            except Exception as exc:
                logged = Outcome(error=portable_error(exc))
            for index in indexes:
                if isinstance(logged, Missing | Outcome):
                    self.replies[first + index] = logged
                else:
                    self._logging[first + index] = logged

    def _apply(self, item: HostInput) -> Reply:
        server = self.server
        if isinstance(item, RunInput):
            return _run(server, item)
        if isinstance(item, TellInput):
            server.local.send(item.agent_id, item.message, item.incarnation)
            return _TAKEN
        if isinstance(item, AskInput):
            self._asked[len(self.replies)] = _ask(server, item)
            return _TAKEN
        if isinstance(item, ChildInput):
            return _child(server, item)
        if isinstance(item, ExpireInput):
            server.peers.child_expire(item.child_id, item.token, item.timeout)
            return _TAKEN
        raise TypeError(f"an agent host takes no {type(item).__name__}")


def deliver(server: HostServer, inputs: Sequence[HostInput]) -> Delivery:
    """Apply ``inputs`` in order, without awaiting (see the module docstring)."""
    delivery = Delivery(server)
    peers: list[PeerInput] = []  # a run of peer messages goes together: one write per receiver
    for item in inputs:
        if isinstance(item, PeerInput):
            peers.append(item)
            continue
        if peers:
            delivery.apply_peers(peers)
            peers = []
        delivery.apply(item)
    if peers:
        delivery.apply_peers(peers)
    return delivery


def _key(item: HostInput) -> str | None:
    """The outbox its reader pulls from the start (a question's is read only once taken)."""
    if isinstance(item, RunInput):
        return item.key
    if isinstance(item, ChildInput):
        return item.wire.token
    return None


def _outcome(ended: concurrent.futures.Future[Any]) -> Outcome:
    error = ended.exception()
    return Outcome(error=portable_error(error)) if error else Outcome(ended.result())


def _run(server: HostServer, item: RunInput) -> Reply:
    """Start or resume a run; its stream events (if asked) and its outcome go to the outbox."""
    if not server.first_start(item.key):
        return _TAKEN  # sent again: it runs once, its outcome goes to the outbox read already
    if item.kind == "run" and server.started_before(item.agent_id, item.run):
        # Started by this host's previous life, which died under it: it does not start twice.
        return Outcome(error=portable_error(_started_before(item.agent_id)))
    local = server.local
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    message = (
        StartRun(item.payload, "", HostReply(future), item.run)
        if item.kind == "run"
        else ResumeRun(item.payload, HostReply(future))
    )
    closer: list[Callable[[], None]] = []
    if item.stream:
        stream = OutboxStream(server.outbox(item.key))
        local.send(item.agent_id, OpenStream(stream, closer), item.incarnation)
    local.send(item.agent_id, message, item.incarnation)

    def ended(done: concurrent.futures.Future[Any]) -> None:
        for close in closer:
            close()
        server.outbox(item.key).close(_outcome(done))

    future.add_done_callback(ended)
    return _TAKEN


def _started_before(agent_id: str) -> HostLostError:
    return HostLostError(
        f"the run of agent {agent_id!r} was started already, on a host that died during it; "
        "it is not started twice. Its log keeps what it did (its turn is closed as "
        "interrupted); run the agent again to go on",
        agent_id=agent_id,
    )


class _Answer:
    """A question's answer: sent back with the lane's call if it comes in time, else outboxed."""

    def __init__(self, server: HostServer, key: str) -> None:
        self._server = server
        self._key = key
        self._lock = threading.Lock()
        self._outcome: Outcome | None = None
        self._late = False  # the call went without it: it goes to the outbox
        self._then: Callable[[_Answer], None] | None = None

    def then(self, callback: Callable[[_Answer], None]) -> None:
        """Call ``callback(self)`` once answered (now, if it is)."""
        with self._lock:
            if self._outcome is None:
                self._then = callback
                return
        callback(self)

    def claim(self) -> Outcome | None:
        """The answer, if it came; if not, it will go to the outbox."""
        with self._lock:
            if self._outcome is None:
                self._late = True
            return self._outcome

    def answered(self, done: concurrent.futures.Future[Any]) -> None:
        outcome = _outcome(done)
        with self._lock:
            self._outcome = outcome
            late, then = self._late, self._then
        if late:
            self._server.outbox(self._key).close(outcome)
        elif then is not None:
            then(self)


def _ask(server: HostServer, item: AskInput) -> _Answer:
    """Ask an agent in its own turn."""
    asked: concurrent.futures.Future[Any] = concurrent.futures.Future()
    answer = _Answer(server, item.key)
    server.local.send(item.agent_id, Ask(Query(item.what), asked), item.incarnation)
    asked.add_done_callback(answer.answered)
    return answer


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _child(server: HostServer, item: ChildInput) -> Reply:
    """A child's run for its parent on another host; its `ChildEnd` goes to the outbox."""
    token = item.wire.token
    try:
        ended = server.peers.child_input(
            item.adopt, item.child_id, item.message, item.wire, item.keep, item.stream
        )
    except Exception as exc:
        server.outbox(token).close(ChildEnd(None, portable_error(exc), Usage()))
        return _TAKEN

    def done(ended: concurrent.futures.Future[ChildEnd]) -> None:
        server.outbox(token).close(ended.result())

    ended.add_done_callback(done)
    return _TAKEN
