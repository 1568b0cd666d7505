"""The host seam: what an agent needs from whatever runs it, and the messages hosts pass.

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
from typing import TYPE_CHECKING, Any, Protocol

from actors.context._quick_init import quick_init
from actors.context._result import RunResult
from actors.context._usage import Usage
from actors.loop._agent import Agent, Subagent
from actors.loop._types import (
    AskApproval,
    CallModel,
    CallTool,
    Finish,
    ModelReplied,
    ResumeChild,
    RunChild,
    SendMessage,
)
from actors.runtime._stream import TreeStream

if TYPE_CHECKING:
    from actors.loop._loop import AgentLoop
    from actors.runtime._cell import AgentCell
    from actors.runtime._node import AgentNode

__all__ = [
    "Ask",
    "Delegate",
    "DelegateDone",
    "DelegateReply",
    "ExpireRun",
    "Host",
    "HostReply",
    "OpenStream",
    "ParentReply",
    "Passivate",
    "Peers",
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


class Host(Protocol):
    """What an `AgentCell` asks of the host that runs it.

    Every method is called from the agent's own turn and must not block: work starts here and
    its completion comes back later as a message to the agent (``cell.deliver``).
    """

    @property
    def closing(self) -> bool:
        """Whether the host is shutting down (agents keep their stored status)."""
        ...

    def persist(self, node: AgentNode) -> None:
        """Write the agent's buffered events and its status; raise `StoreError` on failure."""
        ...

    def call_model(self, cell: AgentCell, effect: CallModel) -> None:
        """Start a model request; deliver `ModelReplied`."""
        ...

    def call_tool(self, cell: AgentCell, effect: CallTool) -> None:
        """Start a tool call; deliver `ToolFinished`."""
        ...

    def call_approval(self, cell: AgentCell, effect: AskApproval) -> None:
        """Ask the in-process approval handler; deliver `ApprovalDecided`."""
        ...

    def run_child(self, cell: AgentCell, effect: RunChild) -> None:
        """Spawn (or reuse a kept) child and start its run; its end arrives as `ChildFinished`."""
        ...

    def resume_child(self, cell: AgentCell, effect: ResumeChild) -> None:
        """Route answers down to a suspended child."""
        ...

    def cancel_agent(self, agent_id: str, reason: str) -> None:
        """Cancel an agent's run in progress (its descendants follow)."""
        ...

    def start_delegation(self, cell: AgentCell, message: Delegate) -> None:
        """Spawn a child for a tool's ``ctx.delegate``; its end arrives as `DelegateDone`."""
        ...

    def tell(self, agent_id: str, message: Any) -> None:
        """Send ``message`` to another agent of this host (a parent), if it is still there."""
        ...

    def peer_exists(self, agent_id: str) -> bool:
        """Whether a peer message to ``agent_id`` can be delivered (live, or asleep)."""
        ...

    def send_peer(self, cell: AgentCell, effect: SendMessage) -> None:
        """Deliver a logged peer message to its receiver as a `PeerMessage` input."""
        ...

    def child_done(self, node: AgentNode, effect: Finish) -> None:
        """A child answered its parent: stop it unless it is kept or waits on a request."""
        ...

    def agent_stopped(self, node: AgentNode) -> None:
        """The agent's cell was released: it no longer counts as live."""
        ...


class Peers(Protocol):
    """The other hosts of a host that is one of many (Ray's agent hosts).

    A `LocalHost` consults it for what is not its own: where a new child starts, and where a
    message to an agent it does not hold goes. Without one, a host runs every agent itself.
    """

    def place(self, child: AgentNode, loop: AgentLoop, subagent: Subagent | None) -> Any:
        """Start a new child on another host if the placement says so.

        Called before the child's first events are written. Returns the stand-in that takes the
        place of the child's actor here (``tell``, ``stop``, ``is_alive``, ``ask``, like a
        pykka ``ActorRef``), or None to start the child on this host.
        """
        ...

    def send(self, agent_id: str, message: Any) -> bool:
        """Deliver ``message`` to an agent of another host; False if no host holds it."""
        ...
