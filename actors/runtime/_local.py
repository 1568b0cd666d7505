"""`LocalHost`: the in-process host behind `Runtime`.

It keeps the records of the agents in memory, starts each agent as a pooled pykka actor around
an `AgentCell`, carries out the agents' effects (models and async tools on the `EffectRunner`'s
asyncio loop, blocking tools on its tool pool, children as more actors), writes their events to
their stores, and routes messages between agents by id. Agents of a store that sit idle past
``idle_after`` are passivated (see `actors.runtime._virtual`); a message to one activates it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import gc
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import pykka

from actors._logging import get_logger
from actors.context._agent_context import AgentContext
from actors.context._event_log import consumers_changed
from actors.context._events import Clock, Event
from actors.exceptions import AgentStoppedError, UserError
from actors.host._approval import ApprovalHandler
from actors.host._cell import AgentCell
from actors.host._children import Orchestration
from actors.host._messages import (
    Ask,
    Delegate,
    DelegateReply,
    ExpireRun,
    ParentReply,
    inline_reply,
)
from actors.host._node import AgentNode, Tree, new_child, new_loop, new_root
from actors.host._persist import SNAPSHOT_EVERY, check_snapshot_every, persist, record_of
from actors.host._tombstone import Tombstone, TreeNode
from actors.loop._agent import Agent, Subagent
from actors.loop._budget import Budget
from actors.loop._default_model import resolve_model
from actors.loop._loop import AgentLoop, TreeLimits
from actors.loop._toolset_host import ToolsetHost
from actors.loop._types import (
    AskApproval,
    CallModel,
    CallTool,
    CancelRun,
    PeerMessage,
    SendMessage,
    ToolFinished,
)
from actors.models._model import Model
from actors.runtime._actor import AgentActor
from actors.runtime._effects import EffectRunner
from actors.runtime._mailbox import Dispatcher
from actors.runtime._pooled import STOP, PooledActor, unregister_all
from actors.runtime._virtual import Passivation
from actors.store._protocol import SessionStore, begin_session

__all__ = ["ASK_TIMEOUT", "LocalHost"]

_log = get_logger("actors.runtime")

ASK_TIMEOUT = 10.0


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

    def peer_exists(self, agent_id: str) -> bool:
        """Whether another host holds an agent of this id (for a peer message to it)."""
        ...

    def find(self, agent_ids: Sequence[str], then: Callable[[], None]) -> None:
        """Look up where agents of other hosts live (off any agent's turn), then call ``then``.

        After it, `peer_exists` answers for them without waiting on another host.
        """
        ...

    def send_peer(self, sender: str, effect: SendMessage) -> bool:
        """Take a logged peer message for an agent of another host; False: it is not remote.

        What it takes, it delivers in order per receiver, once its receiver's host has logged
        it, sending again to a host that restarts meanwhile.
        """
        ...


class LocalHost(Orchestration):
    """Runs agents in this process; `Runtime` is its public face.

    Args:
        limits: Tree limits.
        workers: Mailbox worker threads.
        max_tool_threads: Threads for blocking tools.
        clock: Where event timestamps come from.
        idle_after: Seconds after which an idle agent with a store is passivated, or None.
        default_model: The model of specs that name none.
        peers: The other hosts, when this host is one of many (see `Peers`), or None.
        snapshot_every: Events between snapshots of an agent's fold, or None for none.
    """

    def __init__(
        self,
        *,
        limits: TreeLimits,
        workers: int,
        max_tool_threads: int,
        clock: Clock,
        idle_after: float | None,
        default_model: Model | None = None,
        peers: Peers | None = None,
        snapshot_every: int | None = SNAPSHOT_EVERY,
    ) -> None:
        self.limits = limits
        self.snapshot_every = check_snapshot_every(snapshot_every)
        self.peers = peers
        self.clock = clock
        self.default_model = default_model
        self.effects = EffectRunner(max_tool_threads)
        # Toolsets (MCP servers): one connection per server for the host, on its loop.
        self.toolsets = ToolsetHost(self.effects.loop)
        self.dispatcher = Dispatcher(workers)
        self.lock = threading.RLock()
        self.nodes: dict[str, AgentNode] = {}  # agents with a live actor
        self.cells: dict[str, AgentCell] = {}
        self.sessions: dict[str, tuple[SessionStore, str]] = {}  # session -> (store, root id)
        self._reserved: set[str] = set()  # ids handed out, not yet registered
        self._counters: dict[str, int] = {}  # the next suffix of each name used
        self._closed = False
        # Hold each session this host runs (SessionStore.acquire), so no other process writes it.
        self.exclusive = True
        self._all_stopped = threading.Event()  # set once shutdown has stopped every agent
        self.virtual = Passivation(self, idle_after)

    # -- state --------------------------------------------------------------------------------

    @property
    def closing(self) -> bool:
        """Whether the host is shutting down."""
        return self._closed

    def unique_id(self, wanted: str, *, explicit: bool = False) -> str:
        """A free id, reserved at once: two threads spawning one name get two ids.

        Ids made from a spec's name are never handed out twice in a runtime (a stale ref never
        reaches a new agent): ``a``, then ``a-2``, ``a-3``... An explicit id is used as is, and
        is a `UserError` when an agent here has it (as on Ray and in a simulation).
        """
        with self.lock:
            suffix = self._counters.get(wanted)
            if (explicit or suffix is None) and not self.taken(wanted):
                if suffix is None and not explicit:
                    self._counters[wanted] = 2
                self._reserved.add(wanted)
                return wanted
            if explicit:
                raise UserError(f"agent id {wanted!r} is taken in this runtime")
            suffix = suffix or 2
            while self.taken(agent_id := f"{wanted}-{suffix}"):
                suffix += 1
            self._counters[wanted] = suffix + 1
            self._reserved.add(agent_id)
            return agent_id

    def reserve(self, agent_id: str) -> None:
        """Reserve an exact id (a restored agent's); `UserError` if it is taken."""
        with self.lock:
            if self.taken(agent_id):
                raise UserError(f"agent id {agent_id!r} is taken in this runtime")
            self._reserved.add(agent_id)

    def unreserve(self, agent_id: str) -> None:
        """Give back an id a failed spawn reserved (a name used by nobody is free again)."""
        with self.lock:
            self._reserved.discard(agent_id)
            if self._counters.get(agent_id) == 2:
                del self._counters[agent_id]

    def taken(self, agent_id: str) -> bool:
        """Whether an agent of this host (live, passivated or being started) has the id."""
        with self.lock:
            return (
                agent_id in self.nodes or agent_id in self._reserved or self.virtual.holds(agent_id)
            )

    def session_root(self, store: SessionStore, session_id: str) -> str | None:
        """The root id of a session of ``store`` live or passivated here, or None."""
        with self.lock:
            entry = self.sessions.get(session_id)
        if entry is None or entry[0] is not store:
            return None
        return entry[1]

    def resolve_model(self, spec: Agent[Any]) -> Model:
        """The model an agent of ``spec`` uses: its own, the default, or the environment's."""
        return resolve_model(spec, self.default_model)

    # -- starting agents ------------------------------------------------------------------------

    def start(self, node: AgentNode, loop: AgentLoop, stand_in: Any = None) -> None:
        """Write the agent's first events, then start its actor (fresh, or restored).

        A ``stand_in`` (from `Peers.place`) takes the place of the actor of a child that runs
        on another host.

        Raises:
            UserError: the host is shut down.
            StoreError: its events could not be written; nothing of it stays registered.
        """
        if self._closed:
            self.unreserve(node.agent_id)
            raise UserError("this runtime is shut down; create a new Runtime")
        node.status = loop.status
        try:
            persist(node)
        except BaseException:
            self.unreserve(node.agent_id)
            raise
        with self.lock:
            if self._closed:  # shut down meanwhile: this agent would outlive its host
                self._reserved.discard(node.agent_id)
                node.status = "stopped"
                raise UserError("this runtime is shut down; create a new Runtime")
            if stand_in is not None:
                node.ref = stand_in
            else:
                actor_box: list[pykka.ActorRef[Any]] = []

                def deliver(message: Any) -> None:
                    # From effect threads. An agent stopped meanwhile has nobody left to tell.
                    with contextlib.suppress(pykka.ActorDeadError):
                        actor_box[0].tell(message)

                cell = AgentCell(self, node, loop, deliver)
                observe = self.virtual.observe if self.virtual.idle_after is not None else None
                ref = AgentActor.start(self.dispatcher, cell, observe)
                actor_box.append(ref)
                node.ref = ref
                self.cells[node.agent_id] = cell
            self.nodes[node.agent_id] = node
            self._reserved.discard(node.agent_id)
            if node.parent_id is None and node.tree.store is not None and node.session_id:
                self.sessions[node.session_id] = (node.tree.store, node.agent_id)
            if not node.counted:
                node.tree.live += 1
                node.counted = True
        if stand_in is None:
            self.effects.retain(loop.model)

    def new_loop(
        self, node: AgentNode, context: AgentContext, model: Model | None = None
    ) -> AgentLoop:
        """The state machine of an agent of this host, around its context (fresh or restored)."""
        return new_loop(
            node,
            context,
            model if model is not None else self.resolve_model(node.spec),
            limits=self.limits,
            toolsets=self.toolsets,
            peer_exists=self.peer_exists,
        )

    def spawn_root(
        self,
        agent: Agent[Any],
        *,
        agent_id: str,
        tool_context: Any,
        metadata: dict[str, Any],
        store: SessionStore | None,
        session_id: str | None,
        approval_handler: ApprovalHandler | None,
        new_session: bool = False,
        budget: Budget | None = None,
    ) -> AgentNode:
        """Start a root agent under a reserved id.

        ``new_session``: the store was just seen not to hold the session (no second look).
        """
        node, context = new_root(
            agent_id,
            agent,
            metadata,
            tool_context,
            self.clock,
            store=store,
            approval_handler=approval_handler,
            budget=budget,
        )
        tree = node.tree
        if store is not None:
            try:
                self._open_session(tree, node, store, session_id, new_session)
            except BaseException:
                self.unreserve(agent_id)
                raise
            node.buffer.extend(context.events)  # the initial metadata, logged before spawn
        try:
            self.start(node, self.new_loop(node, context))
        except BaseException:
            if store is not None and tree.session_id is not None:
                self.release_session(store, tree.session_id)
            raise
        return node

    def _open_session(
        self,
        tree: Tree,
        node: AgentNode,
        store: SessionStore,
        session_id: str | None,
        new_session: bool = False,
    ) -> None:
        tree.session_id = tree.incarnation = session_id or uuid.uuid4().hex
        # This process becomes the session's only writer (another holding it is refused here,
        # before anything is written); a session live here already is held already.
        claimed = self.session_root(store, tree.session_id) is None and self.exclusive
        # One transaction: the claim, the session and the root's record (its status saved, so
        # the first persist writes only events).
        record = record_of(node)
        try:
            fresh = begin_session(
                store,
                tree.session_id,
                record,
                data={"agent": node.spec.name},
                acquire=claimed,
            )
            # A fresh context's events would collide with the stored ones at every seq.
            if not fresh and not new_session:
                raise UserError(
                    f"session {tree.session_id!r} already holds agent {node.agent_id!r}; "
                    "continue it with Runtime.restore or Runtime.open_session, or spawn with "
                    "another session_id"
                )
        except BaseException:
            if claimed:
                store.release(tree.session_id)
            raise
        if fresh:
            node.saved_status = record.status

    def release_session(self, store: SessionStore, session_id: str) -> None:
        """Stop holding a session (its root stopped, or it sleeps); a failure is only logged."""
        if not self.exclusive:
            return
        try:
            store.release(session_id)
        except Exception:
            _log.exception("could not release a session", session_id=session_id)

    # -- messages -----------------------------------------------------------------------------

    def tell(self, agent_id: str, message: Any) -> None:
        """Deliver to an agent by id: live, or activated from its store; dropped if gone."""
        # A parent stopped first (a tree stopped top-down) has nobody left to tell.
        with contextlib.suppress(AgentStoppedError):
            self.send(agent_id, message)

    def send(self, agent_id: str, message: Any, incarnation: str | None = None) -> None:
        """Deliver to an agent by id (and, from a ref, to the life of it the ref was made for).

        Raises:
            AgentStoppedError: no agent of that id (and life) is live or passivated here.
        """
        for _ in range(3):
            with self.lock:
                # A fenced or dormant tree holds its messages, in order, until it wakes.
                if self.virtual.deliver(agent_id, message, incarnation):
                    return
                node = self.nodes.get(agent_id)
                if node is None or node.ref is None:
                    break
                if incarnation is not None and node.tree.incarnation != incarnation:
                    break
                try:
                    node.ref.tell(message)
                    return
                except pykka.ActorDeadError:
                    pass  # stopped meanwhile (it may be passivating): look again
        if self.peers is not None and self.peers.send(agent_id, message):
            return
        raise AgentStoppedError(
            f"agent {agent_id!r} is not running; spawn it again or restore its session"
        )

    def ask(
        self, agent_id: str, message: Any, timeout: float, incarnation: str | None = None
    ) -> Any:
        """Ask an agent by id; wait at most ``timeout`` seconds (it is activated if need be)."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.send(agent_id, Ask(message, future), incarnation)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"agent {agent_id!r} did not answer within {timeout} s") from None

    def peer_exists(self, agent_id: str) -> bool:
        """Whether a peer message can reach ``agent_id``: live, passivated, or starting.

        On one host of many, an agent of another host counts too.
        """
        if self.taken(agent_id):
            return True
        return self.peers is not None and self.peers.peer_exists(agent_id)

    def send_peer(self, cell: AgentCell, effect: SendMessage) -> None:
        """Route a peer message by id; a passivated receiver is activated by it."""
        sender = cell.node.agent_id
        self.deliver_peer(sender, effect)

    def deliver_peer(self, sender: str, effect: SendMessage) -> None:
        """Deliver ``sender``'s logged message; a receiver gone meanwhile is logged, not fatal."""
        if self.peers is not None and self.peers.send_peer(sender, effect):
            return  # its receiver lives on another host
        try:
            self.send(effect.to, PeerMessage(effect.message_id, effect.n, sender, effect.content))
        except AgentStoppedError:
            _log.warning(
                "peer message not delivered: its receiver is gone",
                agent_id=sender,
                to=effect.to,
                message_id=effect.message_id,
            )

    # -- views --------------------------------------------------------------------------------

    def status_of(self, agent_id: str, tree: Tree | None = None) -> str:
        """An agent's status, live, passivated (as it was put to sleep), or ended.

        An ended agent's status is what ``tree`` remembers of it.
        """
        with self.lock:
            node = self.nodes.get(agent_id)
            if node is not None and (tree is None or node.tree.incarnation == tree.incarnation):
                return node.status
            dormant = self.virtual.dormant(agent_id)
            if dormant is not None:
                return dormant.statuses.get(agent_id, "idle")
        ended = tree.ended.get(agent_id) if tree is not None else None
        return ended.status if ended is not None else "stopped"

    def subscribe(self, agent_id: str, callback: Callable[[Event], None]) -> Callable[[], None]:
        """Add a listener to an agent's log (kept while it is passivated)."""
        with self.lock:
            node = self.nodes.get(agent_id)
            dormant = self.virtual.dormant(agent_id)
            if dormant is not None:
                listeners = dormant.listeners.setdefault(agent_id, [])
            elif node is not None:
                listeners = node.listeners
            else:
                raise AgentStoppedError(f"agent {agent_id!r} is not running")
            listeners.append(callback)
        consumers_changed()

        def unsubscribe() -> None:
            with self.lock:
                for place in self._listener_lists(agent_id):
                    if callback in place:
                        place.remove(callback)
            consumers_changed()

        return unsubscribe

    def _listener_lists(self, agent_id: str) -> list[list[Callable[[Event], None]]]:
        places = []
        node = self.nodes.get(agent_id)
        if node is not None:
            places.append(node.listeners)
        dormant = self.virtual.dormant(agent_id)
        if dormant is not None and agent_id in dormant.listeners:
            places.append(dormant.listeners[agent_id])
        return places

    def tree_of(self, agent_id: str, tree: Tree | None = None) -> TreeNode:
        """The hierarchy under ``agent_id`` as it stands now.

        Ended agents appear as ``tree`` remembers them.
        """
        with self.lock:
            node = self.nodes.get(agent_id)
            if node is not None:
                children = [
                    self.tree_of(child_id, node.tree)
                    for child_id in node.children
                    if child_id in self.nodes or child_id in node.tree.ended
                ]
                return node.view(tuple(children))
            dormant = self.virtual.dormant(agent_id)
            if dormant is not None:
                return dormant.tree_view(agent_id)
        if tree is not None and agent_id in tree.ended:
            return tree.ended[agent_id].view(tree.ended)
        raise AgentStoppedError(f"agent {agent_id!r} is not running")

    def live_agents(self) -> int:
        """How many agents have a live actor."""
        with self.lock:
            return len(self.nodes)

    # -- effects --------------------------------------------------------------------------------

    def persist(self, node: AgentNode) -> None:
        """Write the agent's buffered events and status (see `persist`)."""
        persist(node)

    def call_model(self, cell: AgentCell, effect: CallModel) -> None:
        """Answer inline when the model can; else a request on the effects loop."""
        model = effect.model or cell.loop.model  # a summarizer's, or the agent's own
        node = cell.node
        if node.wants_deltas():  # a stream is open: the model streams, on the effects loop
            request = dataclasses.replace(effect.request, on_delta=node.publish_delta)
            effect = dataclasses.replace(effect, request=request)
        else:
            inline = inline_reply(model, effect)
            if inline is not None:
                cell.deliver(inline)
                return
        self.effects.call_model(effect, model, cell.deliver)

    def call_tool(self, cell: AgentCell, effect: CallTool) -> None:
        """Start a tool on the effects loop or the tool pool."""
        deliver = cell.deliver if self.peers is None else self._finding_receivers(cell.deliver)
        self.effects.call_tool(effect, deliver, self.delegator(cell.node, effect.ctx.metadata))

    def _finding_receivers(self, deliver: Callable[[Any], None]) -> Callable[[Any], None]:
        """``deliver``, after the other hosts were asked about receivers this host lacks.

        The agent checks its tools' receivers in its own turn (`peer_exists`), which must not
        wait on other hosts: they are looked up before the tool's result reaches it.
        """
        peers = self.peers
        assert peers is not None

        def finished(message: Any) -> None:
            update = message.outcome.update if isinstance(message, ToolFinished) else None
            unknown = [s.to for s in update.sends if not self.taken(s.to)] if update else []
            if unknown:
                peers.find(unknown, lambda: deliver(message))
            else:
                deliver(message)

        return finished

    def call_approval(self, cell: AgentCell, effect: AskApproval) -> None:
        """Ask the tree's approval handler on the tool pool."""
        handler = cell.node.approval_handler
        assert handler is not None
        self.effects.call_approval(effect, handler, cell.deliver)

    def cancel_agent(self, agent_id: str, reason: str) -> None:
        """Cancel an agent's run (and, through it, its descendants')."""
        with self.lock:
            node = self.nodes.get(agent_id)
        if node is not None and node.ref is not None:
            with contextlib.suppress(pykka.ActorDeadError):
                node.ref.tell(CancelRun(reason))

    # -- children -----------------------------------------------------------------------------

    # -- children: the primitives of `Orchestration` ----------------------------------------

    def claim_slot(self, tree: Tree) -> bool:
        """Count a child toward its tree's size now, or refuse: one check, one lock."""
        with self.lock:
            if tree.live >= self.limits.max_agents:
                return False
            tree.live += 1
            return True

    def release_slot(self, tree: Tree) -> None:
        """Give back a slot claimed for a child that was not started."""
        with self.lock:
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
        """Start a child whose tree slot is claimed already (here, or where `Peers` places it)."""
        child, context = new_child(parent, child_id, spec, metadata, tool_context, self.clock)
        child.counted = True
        with self.lock:
            parent.children.append(child_id)
            self._reserved.add(child_id)
        try:
            loop = self.new_loop(child, context)
            stand_in = self.peers.place(child, loop, subagent) if self.peers is not None else None
            self.start(child, loop, stand_in)
        except BaseException:
            with self.lock:
                parent.tree.live -= 1
                parent.children.remove(child_id)
            raise
        return child

    def live_child(self, child_id: str) -> AgentNode | None:
        """The record of a child with a live actor, or None."""
        with self.lock:
            child = self.nodes.get(child_id)
        return child if child is not None and child.alive else None

    def post(self, agent_id: str, message: Any) -> None:
        """Send ``message`` to an agent of this host (see `send`)."""
        self.send(agent_id, message)

    def arm_deadline(self, child: AgentNode, reply: ParentReply | DelegateReply, t: float) -> None:
        """A timer on the effects loop tells the child its run expired."""

        def expire() -> None:
            # The child decides: only the run this timer was armed for may expire (a kept child
            # may be on its next task by now).
            self.tell(child.agent_id, ExpireRun(reply, t))

        self.effects.call_later(t, expire)

    def prepare_then(
        self, agent: Agent[Any], start: Callable[[BaseException | None], None]
    ) -> None:
        """Open the spec's toolsets on the effects loop, then start (the tool's thread waits)."""
        self.toolsets.prepare_then(agent, start)

    def deliver_delegation(self, agent_id: str, message: Delegate) -> None:
        """The delegation goes through the agent's mailbox: its turn starts the child."""
        self.send(agent_id, message)

    def await_delegation(self, future: concurrent.futures.Future[Any]) -> None:
        """Nothing to do: the child runs on the pool while the tool's thread waits."""

    def release_child(self, node: AgentNode) -> None:
        """A child that ended stops (its subtree with it)."""
        if node.ref is not None:
            self.stop_subtree(node, block=False)

    # -- stopping -------------------------------------------------------------------------------

    def stop_agent(self, agent_id: str) -> None:
        """Stop an agent and all its descendants.

        A passivated tree is forgotten here; it stays in its store.
        """
        with self.lock:
            node = self.nodes.get(agent_id)
        if node is not None:
            self.stop_subtree(node, block=True)
            return
        self.virtual.drop(agent_id)

    def stop_subtree(self, node: AgentNode, *, block: bool) -> None:
        """Stop an agent and its live descendants, top-down."""
        # Top-down: a parent stopped first cannot mistake its children's stopping for faults
        # and take another step with their errors.
        if node.ref is not None and node.alive:
            status = node.status
            with contextlib.suppress(pykka.ActorDeadError, pykka.Timeout):
                node.ref.stop(block=block, timeout=ASK_TIMEOUT if block else None)
            node.status = status if status in ("finished", "failed", "cancelled") else "stopped"
        for child_id in list(node.children):
            with self.lock:
                child = self.nodes.get(child_id)
            if child is not None and child.alive:
                self.stop_subtree(child, block=block)

    def remember_ended(self, node: AgentNode) -> None:
        """Keep what a tree view shows of an agent that ended (a restored tree's)."""
        node.tree.remember(Tombstone.of(node))

    def agent_stopped(self, node: AgentNode) -> None:
        """An actor stopped: it no longer counts, and its record goes.

        Its tree remembers how it ended (for tree views).
        """
        with self.lock:
            if node.counted:
                node.counted = False
                node.tree.live -= 1
            if self.nodes.get(node.agent_id) is node:
                del self.nodes[node.agent_id]
                cell = self.cells.pop(node.agent_id, None)
            else:
                cell = None
            passivating = self.virtual.passivating(node.agent_id)
            released = None
            if (
                node.parent_id is None
                and node.session_id
                and not passivating
                and self.sessions.get(node.session_id, (None, ""))[1] == node.agent_id
            ):
                del self.sessions[node.session_id]
                released = node.tree.store
            if not passivating:
                node.tree.remember(Tombstone.of(node))
            last = self._closed and not self.nodes
        if cell is not None:
            self.effects.release(cell.loop.model)
        if released is not None and node.session_id is not None:
            self.release_session(released, node.session_id)
        self.virtual.forget(node)
        if last:  # only now: shutdown closes the effects next, after this model's release
            self._all_stopped.set()

    def shutdown(self, timeout: float) -> None:
        """Stop every agent, then the threads."""
        with self.lock:
            if self._closed:
                return
            # Under the lock: an agent starting now (a child a busy parent spawns) is either in
            # this list or refused by `start`, never started after it.
            self._closed = True
            refs = [n.ref for n in self.nodes.values() if n.ref is not None and n.ref.is_alive()]
            if not self.nodes:
                self._all_stopped.set()
        self.virtual.close()
        # Tell them all to stop, then wait for the last: a future per actor (pykka's stop) costs
        # more than the stop itself. The registry is cleared in one pass afterwards (one by one
        # it is quadratic), and the collector is paused: stopping allocates little, but a
        # collection scans every object of every agent still alive.
        collecting = gc.isenabled()
        gc.disable()
        try:
            for ref in refs:
                actor = ref._actor_weakref()
                if isinstance(actor, PooledActor):
                    actor.actors_registry_bulk = True
                with contextlib.suppress(pykka.ActorDeadError):
                    ref.tell(STOP)
            if not self._all_stopped.wait(timeout):
                _log.warning("agents still running after shutdown's timeout", timeout=timeout)
            unregister_all(refs)
        finally:
            if collecting:
                gc.enable()
        self.dispatcher.close()
        self.toolsets.close()  # before the loop stops: stdio servers are stopped, not orphaned
        self.effects.close()
