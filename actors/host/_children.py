"""Child orchestration, written once for every host: subagents, delegation, deadlines, ends.

A host starts a child when its agent's loop asks (`RunChild`, `ResumeChild`) or when a tool
calls ``ctx.delegate``, arms the child's deadline, and hears when the child answered. What
that means is the same on every host: the child gets the spec, the metadata snapshot of the
call and the tree's ``tool_context``; it counts toward its tree's size; its run has a
deadline (its subagent's, again when resumed); it ends when it answered unless it is kept or
waits on a request. `Orchestration` says it once, over a few primitives that each host fills
in: claim a tree slot, start a child agent, find a live child, post a message to an agent, arm
a deadline, open a spec's toolsets, wait for a delegation, release a child that ended.
"""

from __future__ import annotations

import concurrent.futures
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any

from actors.exceptions import AgentStoppedError, UserError
from actors.host._cell import AgentCell
from actors.host._messages import Delegate, DelegateReply, ParentReply, settle
from actors.host._node import AgentNode, Tree, answered
from actors.loop._agent import Agent, Subagent
from actors.loop._loop import TreeLimits
from actors.loop._types import ChildFinished, Finish, ResumeChild, ResumeRun, RunChild, StartRun

__all__ = ["Orchestration", "run_timeout"]


def run_timeout(child: AgentNode, parent: AgentNode) -> float:
    """The deadline of ``child``'s runs, in seconds: its call's, else its subagent's."""
    if child.run_timeout is not None:
        return child.run_timeout
    # Restored: the parent's spec holds the deadline of the subagent this child runs.
    for subagent in parent.spec.subagent_map.values():
        if subagent.agent is child.spec:
            return subagent.timeout
    return Subagent(child.spec).timeout  # the default


class Orchestration(ABC):
    """Subagents and delegation on a host, over the host's primitives (a mixin of hosts)."""

    limits: TreeLimits

    # -- the primitives a host fills in ------------------------------------------------------

    @abstractmethod
    def claim_slot(self, tree: Tree) -> bool:
        """Count one more agent toward ``tree``'s size now, or refuse (`TreeLimits.max_agents`)."""

    @abstractmethod
    def release_slot(self, tree: Tree) -> None:
        """Give back a slot claimed for a child that was not started after all."""

    @abstractmethod
    def spawn_child(
        self,
        parent: AgentNode,
        child_id: str,
        spec: Agent[Any],
        metadata: Mapping[str, Any],
        tool_context: Any,
        subagent: Subagent | None,
    ) -> AgentNode:
        """Start a child agent whose tree slot is claimed already; its record."""

    @abstractmethod
    def live_child(self, child_id: str) -> AgentNode | None:
        """The record of a child that can still take a run, or None."""

    @abstractmethod
    def post(self, agent_id: str, message: Any) -> None:
        """Queue ``message`` for an agent of this host (`AgentStoppedError` if it is gone)."""

    @abstractmethod
    def arm_deadline(self, child: AgentNode, reply: ParentReply | DelegateReply, t: float) -> None:
        """Expire the run ``reply`` waits for once ``t`` seconds have passed (if still running)."""

    @abstractmethod
    def prepare_then(
        self, agent: Agent[Any], start: Callable[[BaseException | None], None]
    ) -> None:
        """Open the toolsets (MCP servers) of ``agent``'s tree, then call ``start``.

        ``start`` gets the error of a toolset that could not be opened, else None.
        """

    @abstractmethod
    def deliver_delegation(self, agent_id: str, message: Delegate) -> None:
        """Hand a tool's delegation to its agent, which starts the child (`start_delegation`)."""

    @abstractmethod
    def await_delegation(self, future: concurrent.futures.Future[Any]) -> None:
        """Let the delegated child run while its tool waits (on a host whose thread it holds)."""

    @abstractmethod
    def release_child(self, node: AgentNode) -> None:
        """A child ended (it answered and is neither kept nor waiting): free what it holds."""

    # -- written once ---------------------------------------------------------------------------

    def run_child(self, cell: AgentCell, effect: RunChild) -> None:
        """Spawn (or reuse a kept) child and start its run; its end arrives as `ChildFinished`."""
        parent = cell.node
        reply = ParentReply(parent.agent_id, effect.run_id, effect.call_id, effect.child_id)
        if effect.spawn:
            if not self.claim_slot(parent.tree):
                error: Exception = UserError(
                    f"max agents in one tree ({self.limits.max_agents}) reached"
                )
                cell.deliver(
                    ChildFinished(effect.run_id, effect.call_id, effect.child_id, error=error)
                )
                return
            child = self.spawn_child(
                parent,
                effect.child_id,
                effect.subagent.agent,
                effect.metadata,
                effect.tool_context,
                effect.subagent,
            )
            child.keep = effect.subagent.keep
        else:
            found = self.live_child(effect.child_id)
            if found is None:
                error = AgentStoppedError(f"kept child {effect.child_id!r} is no longer running")
                cell.deliver(
                    ChildFinished(effect.run_id, effect.call_id, effect.child_id, error=error)
                )
                return
            child = found
        child.run_timeout = effect.timeout
        self.post(child.agent_id, StartRun(effect.task, "", reply))
        self.arm_deadline(child, reply, effect.timeout)

    def resume_child(self, cell: AgentCell, effect: ResumeChild) -> None:
        """Route answers down to a suspended child."""
        reply = ParentReply(cell.node.agent_id, effect.run_id, effect.call_id, effect.child_id)
        child = self.live_child(effect.child_id)
        if child is None:
            error = AgentStoppedError(f"child {effect.child_id!r} is no longer running")
            cell.deliver(ChildFinished(effect.run_id, effect.call_id, effect.child_id, error=error))
            return
        self.post(child.agent_id, ResumeRun(effect.answers, reply))
        # The resumed run gets its deadline again (the first one ended with the suspension).
        self.arm_deadline(child, reply, run_timeout(child, cell.node))

    def child_done(self, node: AgentNode, effect: Finish) -> None:
        """A child answered its parent: it ends unless it is kept or waits on a request."""
        if answered(node, effect):
            self.release_child(node)

    # -- delegation from tools ----------------------------------------------------------------

    def delegator(
        self, node: AgentNode, metadata: Mapping[str, Any]
    ) -> Callable[..., concurrent.futures.Future[Any]]:
        """The function behind ``ctx.delegate`` for one tool call of ``node``.

        The child starts with ``metadata``, the calling tool's snapshot (taken when the tool
        was called, with the updates of earlier sequential calls): never the live metadata.
        """
        agent_id = node.agent_id

        def delegate(
            agent: Agent[Any], task: str, /, *, timeout: float
        ) -> concurrent.futures.Future[Any]:
            if not isinstance(agent, Agent):
                raise UserError(f"delegate() takes an Agent spec, got {type(agent).__name__}")
            if not isinstance(task, str) or not task.strip():
                raise UserError("delegate() needs a non-empty task string")
            if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
                raise UserError(f"delegate() needs a positive timeout, got {timeout!r}")
            future: concurrent.futures.Future[Any] = concurrent.futures.Future()
            message = Delegate(agent, task, future, metadata, float(timeout))

            def start(error: BaseException | None) -> None:  # once its MCP servers are open
                if error is not None:
                    settle(future, error=error)
                    return
                # The child's deadline is armed when it starts, so the future always ends.
                try:
                    self.deliver_delegation(agent_id, message)
                except AgentStoppedError as exc:
                    settle(future, error=exc)

            self.prepare_then(agent, start)
            self.await_delegation(future)
            return future

        return delegate

    def start_delegation(self, cell: AgentCell, message: Delegate) -> None:
        """Spawn a child for a tool's ``ctx.delegate``; its end arrives as `DelegateDone`."""
        parent = cell.node
        if not self.claim_slot(parent.tree):
            refusal = f"max agents in one tree ({self.limits.max_agents}) reached"
            settle(message.future, error=UserError(f"delegation refused: {refusal}"))
            return
        child_id, problem = cell.loop.begin_delegation(message.agent, message.task)
        if child_id is None or problem is not None:
            self.release_slot(parent.tree)
            settle(message.future, error=UserError(f"delegation refused: {problem}"))
            return
        child = self.spawn_child(
            parent, child_id, message.agent, message.metadata, parent.tool_context, None
        )
        reply = DelegateReply(parent.agent_id, child_id, message.future)
        child.run_timeout = message.timeout
        self.post(child.agent_id, StartRun(message.task, "", reply))
        self.arm_deadline(child, reply, message.timeout)
