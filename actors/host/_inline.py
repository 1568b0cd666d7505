"""`InlineHost`: agents run on the calling thread, one message at a time, in a fixed order.

The same `AgentCell` that a pooled actor hosts runs here with its effects carried out inline:
a model is asked and its reply queued, a tool is called and its outcome queued, a child is a
cell of this host. Messages wait in one queue ordered by (time, sequence); the time only moves
when a host says an effect takes time (the simulator's virtual clock), so the order, and thus
the log, is the same on every run. `SyncDriver` uses it with no time at all.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from actors.context._agent_context import AgentContext
from actors.context._event_log import consumers_changed
from actors.context._events import Clock, Event
from actors.context._run_context import with_delegator
from actors.exceptions import AgentStoppedError
from actors.host._agenda import Agenda
from actors.host._approval import ApprovalHandler, decide_approval
from actors.host._cell import AgentCell
from actors.host._children import Orchestration
from actors.host._messages import (
    Delegate,
    DelegateDone,
    DelegateReply,
    ParentReply,
    inline_reply,
    settle,
)
from actors.host._node import AgentNode, Tree, new_child, new_loop
from actors.host._persist import persist
from actors.host._tombstone import TreeNode
from actors.loop._agent import Agent, Subagent
from actors.loop._default_model import resolve_model
from actors.loop._loop import AgentLoop, TreeLimits
from actors.loop._outcome import outcome_of_error, outcome_of_return
from actors.loop._toolset_host import ToolsetHost
from actors.loop._types import (
    ApprovalDecided,
    AskApproval,
    CallModel,
    CallTool,
    CancelRun,
    ModelReplied,
    PeerMessage,
    SendMessage,
    ToolFinished,
)
from actors.models._model import Model

__all__ = ["InlineHost"]


class InlineHost(Orchestration):
    """Runs a tree of agents on the calling thread (the `Host` seam, with no threads).

    Args:
        clock: Where event timestamps come from.
        limits: Tree limits.
        approval_handler: The in-process approval handler of the tree, or None.
        default_model: The model of specs that name none.
    """

    snapshot_every: int | None = None  # an inline host keeps no snapshots

    def __init__(
        self,
        *,
        clock: Clock,
        limits: TreeLimits | None = None,
        approval_handler: ApprovalHandler | None = None,
        default_model: Model | None = None,
        toolsets: ToolsetHost | None = None,
    ) -> None:
        self.clock = clock
        self.toolsets = toolsets
        self.limits = limits or TreeLimits()
        self.default_model = default_model
        self.approval_handler = approval_handler
        self.cells: dict[str, AgentCell] = {}
        self.now = 0.0  # the scheduler's time (seconds); only hosts with durations move it
        self._queue = Agenda()
        self._busy: set[str] = set()
        self._held: list[tuple[str, Any]] = []  # for agents busy in an outer turn

    @property
    def closing(self) -> bool:
        """An inline host never shuts down under its agents."""
        return False

    # -- agents -------------------------------------------------------------------------------

    def resolve_model(self, spec: Agent[Any]) -> Model:
        """The model an agent of ``spec`` uses: its own, the default, or the environment's."""
        return resolve_model(spec, self.default_model)

    def new_loop(
        self, node: AgentNode, context: AgentContext, model: Model | None = None
    ) -> AgentLoop:
        """The state machine of an agent of this host, around its context."""
        return new_loop(
            node,
            context,
            model if model is not None else self.resolve_model(node.spec),
            limits=self.limits,
            toolsets=self.toolsets,
            peer_exists=self.peer_exists,
        )

    def add(self, node: AgentNode, context: AgentContext) -> AgentCell:
        """Host a fresh agent; it counts toward its tree's size (a child's slot is claimed)."""
        if not node.counted:
            node.tree.live += 1
            node.counted = True
        loop = self.new_loop(node, context)
        agent_id = node.agent_id
        cell = AgentCell(self, node, loop, lambda message: self.tell(agent_id, message))
        node.status = loop.status
        self.cells[agent_id] = cell
        persist(node)
        return cell

    # -- the queue ----------------------------------------------------------------------------

    def tell(self, agent_id: str, message: Any, delay: float = 0.0) -> None:
        """Queue a message for an agent, ``delay`` seconds from now.

        A delegated child's end goes straight to its parent, whose tool waits for it inside
        the parent's own turn.
        """
        cell = self.cells.get(agent_id)
        if isinstance(message, DelegateDone) and cell is not None and agent_id in self._busy:
            cell.receive(message)
            return
        self._queue.push(self.now + delay, agent_id, message, self.now)

    def pump(self, until: Callable[[], bool] | None = None) -> None:
        """Handle queued messages in order until the queue is empty (or ``until()`` holds)."""
        cells, busy = self.cells, self._busy
        while True:
            if until is not None and until():
                return
            item = self._next()  # None once nothing is queued
            if item is None:
                return
            agent_id, message = item
            cell = cells.get(agent_id)
            if cell is None or cell.node.status == "stopped":
                continue
            busy.add(agent_id)
            try:
                cell.receive(message)
            finally:
                busy.discard(agent_id)

    def _take_held(self) -> tuple[str, Any] | None:
        """The first held message whose agent's turn is no longer on the stack."""
        for index, (agent_id, message) in enumerate(self._held):
            if agent_id not in self._busy:
                del self._held[index]
                return agent_id, message
        return None

    def _next(self) -> tuple[str, Any] | None:
        if self._held and (ready := self._take_held()) is not None:
            return ready
        while (item := self._queue.pop()) is not None:
            when, _, agent_id, message = item
            self.now = max(self.now, when)
            if agent_id in self._busy:
                # Its turn is on the stack (a tool waits on a delegated child): later.
                self._held.append((agent_id, message))
                continue
            return agent_id, message
        return None

    # -- effects --------------------------------------------------------------------------------

    where = "on this host"
    """How errors name this host (the simulator says "in this simulation")."""

    def live(self, agent_id: str) -> AgentCell:
        """The cell of a live agent; `AgentStoppedError` if there is none."""
        cell = self.cells.get(agent_id)
        if cell is None or cell.node.status == "stopped":
            raise AgentStoppedError(f"agent {agent_id!r} is not running {self.where}")
        return cell

    def subscribe(self, agent_id: str, callback: Callable[[Event], None]) -> Callable[[], None]:
        """Call ``callback`` with each event the agent appends."""
        listeners = self.live(agent_id).node.listeners
        listeners.append(callback)
        consumers_changed()

        def unsubscribe() -> None:
            if callback in listeners:
                listeners.remove(callback)
                consumers_changed()

        return unsubscribe

    def tree_of(self, agent_id: str, tree: Any = None) -> TreeNode:
        """The hierarchy under ``agent_id``."""
        cell = self.cells.get(agent_id)
        if cell is None:
            raise AgentStoppedError(f"agent {agent_id!r} is not {self.where}")
        node = cell.node
        return node.view(
            tuple(self.tree_of(child) for child in node.children if child in self.cells)
        )

    def persist(self, node: AgentNode) -> None:
        """Write the agent's buffered events, if its tree has a store."""
        persist(node)

    def run_coroutine(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run a coroutine to its end on this thread (or a helper thread if a loop runs here)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(coro)
        # Called from inside a coroutine of this host (an async tool delegating): a nested
        # loop cannot run on this thread.
        box: list[Any] = []

        def run() -> None:
            try:
                box.append((True, asyncio.run(coro)))
            except BaseException as exc:
                box.append((False, exc))

        thread = threading.Thread(target=run, name="actors-inline")
        thread.start()
        thread.join()
        ok, value = box[0]
        if not ok:
            raise value
        return value

    def call_model(self, cell: AgentCell, effect: CallModel) -> None:
        """Ask the model now; its reply is queued."""
        cell.deliver(self.model_reply(cell, effect))

    def model_reply(self, cell: AgentCell, effect: CallModel) -> ModelReplied:
        """The model's reply to ``effect`` (or its error), asked on this thread."""
        model = effect.model or cell.loop.model  # a summarizer's, or the agent's own
        inline = inline_reply(model, effect)  # an InlineModel: no event loop needed
        if inline is not None:
            return inline

        async def ask() -> Any:
            return await asyncio.wait_for(model.request(effect.request), effect.timeout)

        try:
            response = self.run_coroutine(ask())
        except Exception as exc:
            return ModelReplied(effect.run_id, effect.step, error=exc)
        return ModelReplied(effect.run_id, effect.step, response=response)

    def call_tool(self, cell: AgentCell, effect: CallTool) -> None:
        """Call the tool now; its outcome is queued."""
        cell.deliver(self.tool_outcome(cell, effect))

    def tool_outcome(self, cell: AgentCell, effect: CallTool) -> ToolFinished:
        """Run a tool on this thread (an async one to its end) and return its outcome."""
        delegator = self.delegator(cell.node, effect.ctx.metadata)
        ctx = with_delegator(effect.ctx, delegator)
        try:
            value = effect.tool.invoke(ctx, effect.arguments)
            if inspect.isawaitable(value):

                async def wait() -> Any:
                    return await value

                value = self.run_coroutine(wait())
            outcome = outcome_of_return(value)
        except Exception as exc:
            outcome = outcome_of_error(exc)
        return ToolFinished(effect.run_id, effect.call.id, outcome)

    def call_approval(self, cell: AgentCell, effect: AskApproval) -> None:
        """Ask the approval handler now; its answer is queued."""
        handler = cell.node.approval_handler
        assert handler is not None
        answer = decide_approval(handler, effect.request)
        cell.deliver(ApprovalDecided(effect.run_id, effect.call_id, answer))

    def cancel_agent(self, agent_id: str, reason: str) -> None:
        """Queue a cancel for the agent."""
        if agent_id in self.cells:
            self.tell(agent_id, CancelRun(reason))

    def peer_exists(self, agent_id: str) -> bool:
        """Whether an agent of this host has the id and has not stopped."""
        cell = self.cells.get(agent_id)
        return cell is not None and cell.node.status != "stopped"

    def send_peer(self, cell: AgentCell, effect: SendMessage) -> None:
        """Queue a peer message for its receiver."""
        sender = cell.node.agent_id
        message = PeerMessage(effect.message_id, effect.n, sender, effect.content)
        self.tell(effect.to, message, self.peer_delay(cell, effect))

    def peer_delay(self, cell: AgentCell, effect: SendMessage) -> float:
        """How long a peer message travels (none here; the simulator may say otherwise)."""
        return 0.0

    # -- children -----------------------------------------------------------------------------

    # -- children: the primitives of `Orchestration` ------------------------------------------

    def claim_slot(self, tree: Tree) -> bool:
        """Count a child toward its tree's size now, or refuse."""
        if tree.live >= self.limits.max_agents:
            return False
        tree.live += 1
        return True

    def release_slot(self, tree: Tree) -> None:
        """Give back a slot claimed for a child that was not started."""
        tree.live -= 1

    def spawn_child(
        self,
        parent: AgentNode,
        child_id: str,
        spec: Agent[Any],
        metadata: Mapping[str, Any],
        tool_context: Any,
        subagent: Subagent | None,
    ) -> AgentNode:
        """Host a child whose tree slot is claimed already."""
        node, context = new_child(parent, child_id, spec, metadata, tool_context, self.clock)
        parent.children.append(child_id)
        node.counted = True  # its slot was claimed
        self.add(node, context)
        return node

    def live_child(self, child_id: str) -> AgentNode | None:
        """The record of a child of this host that has not stopped, or None."""
        cell = self.cells.get(child_id)
        return cell.node if cell is not None and cell.node.status != "stopped" else None

    def post(self, agent_id: str, message: Any) -> None:
        """Queue ``message`` for an agent of this host."""
        self.tell(agent_id, message)

    def arm_deadline(self, child: AgentNode, reply: ParentReply | DelegateReply, t: float) -> None:
        """Nothing: no time passes on an inline host (the simulator arms it on its clock)."""

    def prepare_then(
        self, agent: Agent[Any], start: Callable[[BaseException | None], None]
    ) -> None:
        """Open the spec's toolsets here and now, then start."""
        if self.toolsets is not None:
            try:
                self.toolsets.prepare(agent)
            except Exception as exc:
                start(exc)
                return
        start(None)

    def deliver_delegation(self, agent_id: str, message: Delegate) -> None:
        """The tool runs inside its agent's turn: the child starts at once."""
        self.start_delegation(self.cells[agent_id], message)

    def await_delegation(self, future: concurrent.futures.Future[Any]) -> None:
        """The child runs here, to its end, before the tool goes on."""
        self.pump(until=future.done)
        if not future.done():
            settle(future, error=AgentStoppedError("the delegated child never answered"))

    def release_child(self, node: AgentNode) -> None:
        """Nothing to free: an inline host keeps its agents for inspection."""

    def agent_stopped(self, node: AgentNode) -> None:
        """Nothing to free: an inline host keeps its agents for inspection."""
