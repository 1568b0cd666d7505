"""The messages hosts pass to agents and back (the seam itself, `Host`, is the cell's).

An agent's loop (`actors.loop.AgentLoop`) is wrapped in an `AgentCell` that every host shares:
it applies inputs, writes ahead to the store, and hands each effect to its `Host`. A host
decides where effects run and how messages travel: `Runtime`'s pooled pykka actors with an
asyncio loop and a tool pool; the inline host under `SyncDriver`; the simulator's virtual
clock; Ray's agent hosts. Agents address each other by id through their host, never by an
object reference, so an agent may be passivated, restored or live in another process.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from actors.context._quick_init import quick_init
from actors.context._result import RunResult
from actors.context._usage import Usage
from actors.host._stream import TreeStream
from actors.loop._agent import Agent
from actors.loop._types import (
    CallModel,
    ModelReplied,
    PeerMessage,
)

__all__ = [
    "Ask",
    "Delegate",
    "DelegateDone",
    "DelegateReply",
    "ExpireRun",
    "HostReply",
    "OpenStream",
    "ParentReply",
    "Passivate",
    "PeerBatch",
    "Query",
    "Reply",
    "inline_reply",
    "settle",
]


def inline_reply(model: Any, effect: CallModel) -> ModelReplied | None:
    """The reply of a model that answers without an event loop (a test model), or None.

    A model with ``respond_inline`` may answer on the calling thread; its exception is the
    agent's model error, as a request's would be. None: ask it with a request.
    """
    respond = getattr(model, "respond_inline", None)
    if respond is None:
        return None
    try:
        response = respond(effect.request)
    except Exception as exc:  # a scripted failure: a value for the agent
        return ModelReplied(effect.run_id, effect.step, error=exc)
    if response is None:
        return None
    return ModelReplied(effect.run_id, effect.step, response=response)


def settle(
    future: concurrent.futures.Future[Any],
    *,
    result: Any = None,
    error: BaseException | None = None,
) -> None:
    """Resolve ``future`` once.

    A future its waiter already cancelled (an abandoned ``await``, an async tool that timed out)
    is left as it is: raising here would kill the agent silently.
    """
    with contextlib.suppress(concurrent.futures.InvalidStateError):
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)


# -- who waits for a run ------------------------------------------------------------------------


@quick_init
@dataclass(frozen=True, slots=True)
class HostReply:
    """The host waits on ``future`` for the run's result."""

    future: concurrent.futures.Future[Any]


@quick_init
@dataclass(frozen=True, slots=True)
class ParentReply:
    """A parent's call ``call_id`` waits for this child's run."""

    parent_id: str
    run_id: str
    call_id: str
    child_id: str


@quick_init
@dataclass(frozen=True, slots=True)
class DelegateReply:
    """A tool of the parent waits on ``future`` for this delegated child's output."""

    parent_id: str
    child_id: str
    future: concurrent.futures.Future[Any]


Reply = HostReply | ParentReply | DelegateReply

# -- messages between hosts and agents, besides the loop's inputs --------------------------------


@quick_init
@dataclass(frozen=True, slots=True)
class Ask:
    """A question sent by agent id: the answer to ``message`` settles ``future``.

    The agent may have to be activated first, so the answer cannot come through pykka's ask.
    """

    message: Any
    future: concurrent.futures.Future[Any]


@quick_init
@dataclass(frozen=True, slots=True)
class PeerBatch:
    """Peer messages for one agent, applied in order in one turn and written with one write.

    What a host that receives many messages at once from another host sends (a `PeerMessage`
    alone costs a write of the store each).
    """

    messages: tuple[PeerMessage, ...]


@quick_init
@dataclass(frozen=True, slots=True)
class OpenStream:
    """Send the events of this agent and its descendants to ``stream``.

    The agent appends the function that closes it to ``closer`` (read when the run ends).
    """

    stream: TreeStream
    closer: list[Callable[[], None]]


@quick_init
@dataclass(frozen=True, slots=True)
class Passivate:
    """Sleep now if idle: the agent stops in this turn, logging ``passivated``.

    ``future`` gets whether it did.
    """

    future: concurrent.futures.Future[bool]


@quick_init
@dataclass(frozen=True, slots=True)
class Query:
    """A question answered from the agent's own turn (``ask``): ``context`` or ``status``."""

    what: str


@quick_init
@dataclass(frozen=True, slots=True)
class Delegate:
    """A tool asked its agent to run a child (``ctx.delegate``)."""

    agent: Agent[Any]
    task: str
    future: concurrent.futures.Future[Any]
    metadata: Mapping[str, Any]
    timeout: float


@quick_init
@dataclass(frozen=True, slots=True)
class DelegateDone:
    """A delegated child finished; the parent books it and answers the waiting tool."""

    reply: DelegateReply
    result: RunResult[Any] | None
    error: BaseException | None
    tree_usage: Usage


@quick_init
@dataclass(frozen=True, slots=True)
class ExpireRun:
    """A parent's deadline for one run of this child passed."""

    reply: ParentReply | DelegateReply
    timeout: float
