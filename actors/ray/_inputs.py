"""What a `Lane` carries to an agent host: the inputs its caller sends to agents there.

A host applies the inputs of one lane call in order, each to its agent's mailbox
(`actors.ray._inbox.deliver`), and answers each: `Taken`, `Missing` (no such agent here), or
an `Outcome` with the error that kept it out (or a question's answer). What an input starts
ends later: a run's end, a child's `ChildEnd` (and a question's answer that was slow to come)
close the host's outbox of the input's key, where the caller's own pull reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from actors.loop._agent import Agent
from actors.loop._budget import Budget
from actors.loop._types import ResumeRun, StartRun
from actors.ray._wire import TreeSeed, WireReply

__all__ = [
    "Adopt",
    "AskInput",
    "ChildInput",
    "ExpireInput",
    "HostInput",
    "PeerInput",
    "RunInput",
    "TellInput",
]


@dataclass(frozen=True, slots=True)
class Adopt:
    """A new child, as it travels to the host that will run it.

    Attributes:
        seed: What its tree shares (store, session, tool_context, approval handler).
        parent_host: The index of its parent's host.
        spec: Its spec.
        context: Its context as its parent's host made it (first events already stored).
        path: The agent ids from the root down to it.
        depth: Its depth in the tree.
        position: Its spawn position in the session.
        budgets: The shared budgets (``Budget(shared=...)``) that cover it from above,
            outermost first: kept in the store, they hold on any host. A budget of its
            ancestors that is not shared stays on their host.
    """

    seed: TreeSeed
    parent_host: int
    spec: Agent[Any]
    context: dict[str, Any] = field(repr=False)
    path: tuple[str, ...]
    depth: int
    position: int
    budgets: tuple[Budget, ...] = ()


@dataclass(frozen=True, slots=True)
class RunInput:
    """The driver starts (``kind="run"``) or resumes a run of an agent.

    Attributes:
        agent_id: The agent.
        incarnation: The life of the agent the caller's ref was made for, or None.
        kind: ``"run"`` (``payload`` is the prompt) or ``"resume"`` (the answers by id).
        payload: The prompt, or the answers.
        key: The outbox that gets the run's stream events (with ``stream``) and its outcome.
        stream: Whether the run's events go to the outbox too.
        run: The caller's key of the run, the same each time it is sent (after its agent was
            activated again): logged with the run's start, so it starts once.
    """

    agent_id: str
    incarnation: str | None
    kind: Literal["run", "resume"]
    payload: Any
    key: str
    stream: bool
    run: str = ""


@dataclass(frozen=True, slots=True)
class TellInput:
    """A message for an agent's mailbox that nobody waits on (a steer, a cancel)."""

    agent_id: str
    incarnation: str | None
    message: Any


@dataclass(frozen=True, slots=True)
class AskInput:
    """A question (``context``, ``status``, ``idle``) the agent answers in its own turn.

    The answer closes the outbox ``key``.
    """

    agent_id: str
    incarnation: str | None
    what: str
    key: str


@dataclass(frozen=True, slots=True)
class ChildInput:
    """A parent's host starts (adopting it first, if new) or resumes a child of another host.

    The child's `ChildEnd` closes the outbox ``wire.token``.

    Attributes:
        adopt: What the child's host needs to start it (its first run only).
        child_id: The child.
        message: The run, without its reply (``wire`` says who waits).
        wire: Who waits for the run on the parent's host.
        keep: Whether the child lives on after its run.
        stream: Whether the parent's host wants the child's stream events.
    """

    adopt: Adopt | None
    child_id: str
    message: StartRun | ResumeRun
    wire: WireReply
    keep: bool
    stream: bool


@dataclass(frozen=True, slots=True)
class ExpireInput:
    """A parent's deadline for one run (``token``) of a child of this host passed."""

    child_id: str
    token: str
    timeout: float


@dataclass(frozen=True, slots=True)
class PeerInput:
    """An agent of another host sent ``to`` a peer message (logged in its sender's log).

    The host answers once the receiver has logged it (``message_received``), so its sender's
    host knows it need not send it again. Numbered ``n`` among its sender's messages: one
    that arrives twice (sent again after a host restarted) changes nothing the second time.
    """

    to: str
    sender: str
    message_id: str
    n: int
    content: str | list[dict[str, Any]]


HostInput = RunInput | TellInput | AskInput | ChildInput | ExpireInput | PeerInput
