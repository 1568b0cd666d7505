"""`deliver`: a host applies the inputs of one lane call, in order, to its agents' mailboxes.

Each input goes into its agent's mailbox before the next is looked at, and nothing here
awaits or blocks: one caller's inputs reach the agents in the order the caller sent them
(see `actors.ray._lane`). Each is answered at once -- taken, `Missing`, or the error that kept
it out -- and what it starts ends in the host's outbox of its key: a run's `Outcome` (after
its stream events), a question's answer, a child's `ChildEnd`.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from actors.context._usage import Usage
from actors.exceptions import AgentStoppedError
from actors.loop._types import ResumeRun, StartRun
from actors.ray._inputs import AskInput, ChildInput, ExpireInput, HostInput, RunInput, TellInput
from actors.ray._outbox import OutboxStream
from actors.ray._wire import ChildEnd, Missing, Outcome, portable_error
from actors.runtime._host import Ask, HostReply, OpenStream, Query

if TYPE_CHECKING:
    from actors.ray._server import HostServer

__all__ = ["deliver"]

Reply = Outcome | Missing

_TAKEN = Outcome()


def deliver(server: HostServer, inputs: Sequence[HostInput]) -> list[Reply]:
    """Apply ``inputs`` in order; one answer each (see the module docstring)."""
    return [_apply(server, item) for item in inputs]


def _apply(server: HostServer, item: HostInput) -> Reply:
    try:
        if isinstance(item, RunInput):
            return _run(server, item)
        if isinstance(item, TellInput):
            server.local.send(item.agent_id, item.message, item.incarnation)
            return _TAKEN
        if isinstance(item, AskInput):
            return _ask(server, item)
        if isinstance(item, ChildInput):
            return _child(server, item)
        if isinstance(item, ExpireInput):
            server.peers.child_expire(item.child_id, item.token, item.timeout)
            return _TAKEN
        raise TypeError(f"an agent host takes no {type(item).__name__}")
    except AgentStoppedError:
        reply: Reply = Missing(getattr(item, "agent_id", ""))
    except Exception as exc:
        reply = Outcome(error=portable_error(exc))
    key = _key(item)
    if key is not None:  # its reader ends too
        server.outbox(key).close(reply)
    return reply


def _key(item: HostInput) -> str | None:
    if isinstance(item, RunInput | AskInput):
        return item.key
    if isinstance(item, ChildInput):
        return item.wire.token
    return None


def _closing(
    server: HostServer, key: str, then: Callable[[], None] | None = None
) -> Callable[[concurrent.futures.Future[Any]], None]:
    """A callback closing the outbox ``key`` with a future's `Outcome`."""

    def done(ended: concurrent.futures.Future[Any]) -> None:
        error = ended.exception()
        outcome = Outcome(error=portable_error(error)) if error else Outcome(ended.result())
        if then is not None:
            then()
        server.outbox(key).close(outcome)

    return done


def _run(server: HostServer, item: RunInput) -> Reply:
    """Start or resume a run; its stream events (if asked) and its outcome go to the outbox."""
    local = server.local
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    message = (
        StartRun(item.payload, "", HostReply(future))
        if item.kind == "run"
        else ResumeRun(item.payload, HostReply(future))
    )
    closer: list[Callable[[], None]] = []
    if item.stream:
        stream = OutboxStream(server.outbox(item.key))
        local.send(item.agent_id, OpenStream(stream, closer), item.incarnation)
    local.send(item.agent_id, message, item.incarnation)

    def close_stream() -> None:
        for close in closer:
            close()

    future.add_done_callback(_closing(server, item.key, close_stream))
    return _TAKEN


def _ask(server: HostServer, item: AskInput) -> Reply:
    """Ask an agent in its own turn; the answer goes to the outbox."""
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    server.local.send(item.agent_id, Ask(Query(item.what), future), item.incarnation)
    future.add_done_callback(_closing(server, item.key))
    return _TAKEN


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
