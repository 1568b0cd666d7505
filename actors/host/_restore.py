"""Rebuilding a persisted agent tree: contexts from the store, crash recovery, live actors."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from actors.context._agent_context import AgentContext
from actors.context._event_log import consumers_changed
from actors.context._events import Event
from actors.context._messages import ToolCall, ToolResultMessage
from actors.context._snapshot import from_snapshot
from actors.context._suspension import Request
from actors.exceptions import (
    AgentDefinitionError,
    CorruptStoreError,
    SerializationError,
    UserError,
)
from actors.host._approval import ApprovalHandler
from actors.host._node import AgentNode, Tree
from actors.host._observer import current_observer, notify_restore
from actors.host._persist import persist
from actors.loop._agent import Agent, Subagent
from actors.loop._budget import ledger_for
from actors.loop._budget_log import budget_of, open_holds, spend_of
from actors.loop._loop import AgentLoop
from actors.loop._peers import sends_of
from actors.loop._recovery import open_turn, open_turn_start, recover
from actors.loop._subagent_calls import child_tool_context
from actors.loop._types import SendMessage
from actors.store._fork import rename_events, shared_upto
from actors.store._protocol import SessionStore
from actors.store._records import StoredAgent

if TYPE_CHECKING:
    from actors.context._events import Clock
    from actors.loop._loop import TreeLimits
    from actors.loop._toolset_host import ToolsetHost
    from actors.models._model import Model

__all__ = ["RestoreHost", "restore_tree"]

# The spec of an agent that ended and whose spec was not given: it never runs again.
_UNKNOWN_SPEC: Agent[Any] = Agent("(unknown)")


class RestoreHost(Protocol):
    """What a restore needs of the host it restores into."""

    @property
    def clock(self) -> Clock: ...
    @property
    def limits(self) -> TreeLimits: ...
    def taken(self, agent_id: str) -> bool: ...
    def reserve(self, agent_id: str) -> None: ...
    def resolve_model(self, spec: Agent[Any]) -> Model: ...
    def new_loop(
        self, node: AgentNode, context: AgentContext, model: Model | None = None
    ) -> AgentLoop: ...
    def start(self, node: AgentNode, loop: AgentLoop) -> None: ...
    def stop_subtree(self, node: AgentNode, *, block: bool) -> None: ...
    def remember_ended(self, node: AgentNode) -> None: ...
    @property
    def toolsets(self) -> ToolsetHost | None: ...
    def peer_exists(self, agent_id: str) -> bool: ...
    def deliver_peer(self, sender: str, effect: SendMessage) -> None: ...


def _spec_index(agents: Sequence[Agent[Any]] | Mapping[str, Agent[Any]]) -> dict[str, Agent[Any]]:
    """Specs by name, including every subagent reachable from the given ones."""
    roots = list(agents.values()) if isinstance(agents, Mapping) else list(agents)
    index: dict[str, Agent[Any]] = {}
    todo = roots
    while todo:
        spec = todo.pop()
        if not isinstance(spec, Agent):
            raise AgentDefinitionError(f"restore takes Agent specs, got {type(spec).__name__}")
        if spec.name in index:
            continue
        index[spec.name] = spec
        todo.extend(s.agent for s in spec.subagent_map.values())
    return index


def restore_tree(
    host: RestoreHost,
    session_id: str,
    *,
    store: SessionStore,
    agents: Sequence[Agent[Any]] | Mapping[str, Agent[Any]],
    tool_context: Any = None,
    approval_handler: ApprovalHandler | None = None,
    listeners: Mapping[str, Sequence[Callable[[Event], None]]] | None = None,
    activated: bool = False,
) -> AgentNode:
    """See `Runtime.restore`; returns the root's node.

    An activation (``activated``) of a passivated tree logs ``activated`` in each agent that
    comes back.

    Only the agents that come back to life (the root, every suspended agent and every kept
    child) need their specs; agents that ended are shown in the tree from their records.

    A restore (not an activation, which follows an orderly passivation) sends every peer
    message of the tree's logs again once the tree is live: a crash may have lost one between
    its step and its delivery, and receivers ignore the ones they already heard.
    """
    if getattr(host, "exclusive", False):
        store.acquire(session_id)  # this process becomes its only writer, or nothing happens
    try:
        return _restore(
            host,
            session_id,
            store=store,
            agents=agents,
            tool_context=tool_context,
            approval_handler=approval_handler,
            listeners=listeners,
            activated=activated,
        )
    except BaseException:
        if getattr(host, "exclusive", False):
            store.release(session_id)
        raise


def _restore(
    host: RestoreHost,
    session_id: str,
    *,
    store: SessionStore,
    agents: Sequence[Agent[Any]] | Mapping[str, Agent[Any]],
    tool_context: Any,
    approval_handler: ApprovalHandler | None,
    listeners: Mapping[str, Sequence[Callable[[Event], None]]] | None,
    activated: bool,
) -> AgentNode:
    # An activation follows an orderly passivation: each agent's snapshot and the events
    # after it are enough. A restore after a crash reads whole logs (it sends every peer
    # message of them again).
    snapshots = activated and getattr(host, "snapshot_every", None) is not None
    stored = store.load(session_id, snapshots=snapshots)
    specs = _spec_index(agents)
    by_id = {a.record.agent_id: a for a in stored.agents}
    if stored.root_agent_id not in by_id:
        raise AgentDefinitionError(f"session {session_id!r} has no root agent record")
    # Agent ids name actors in a host: a second agent under the same id would replace the
    # first in the host's records, and that actor would outlive the runtime.
    taken = sorted(agent_id for agent_id in by_id if host.taken(agent_id))
    if taken:
        raise UserError(
            f"session {session_id!r} holds agents {taken}, and this runtime already has agents "
            "of those ids; restore it in another Runtime"
        )
    tree = Tree(
        stored.root_agent_id,
        store=store,
        session_id=session_id,
        approval_handler=approval_handler,
    )
    contexts: dict[str, AgentContext] = {}
    nodes: dict[str, AgentNode] = {}
    narrowing_failed: dict[str, tuple[str, Exception]] = {}  # raised if the agent goes live
    for entry in stored.agents:
        record = entry.record
        parent = nodes.get(record.parent_id) if record.parent_id else None
        if record.parent_id and parent is None:
            continue  # under an agent that was never recorded: nothing can reach it
        # Two subagents may run specs of one name: the parent's call says which one it was.
        subagent = (
            _subagent_of(parent, contexts[parent.agent_id], record.agent_id, record.name)
            if parent is not None
            else None
        )
        spec = subagent.agent if subagent is not None else specs.get(record.name)
        # What the agent got when it was spawned: the parent's tool_context, or narrowed.
        node_tool_context = tool_context if parent is None else parent.tool_context
        if subagent is not None:
            try:
                node_tool_context = child_tool_context(subagent, node_tool_context)
            except Exception as exc:
                narrowing_failed[record.agent_id] = (subagent.tool_name, exc)
                node_tool_context = None
        try:
            ctx, snapshot_seq = _context_of(store, session_id, entry, host.clock, stored.data)
        except SerializationError as exc:  # only the restore knows which session it was
            raise SerializationError(f"session {session_id!r}: {exc}") from None
        if spec is not None:
            ctx.max_iterations = spec.max_iterations
        contexts[record.agent_id] = ctx
        node = AgentNode(
            record.agent_id,
            record.name,
            record.parent_id,
            parent.depth + 1 if parent else 0,
            spec if spec is not None else _UNKNOWN_SPEC,
            node_tool_context,
            tree,
            path=(*parent.path, record.agent_id) if parent else (record.agent_id,),
            position=record.position,
            status=record.status,
            saved_status=record.status,
            snapshot_seq=snapshot_seq,
        )
        if parent is not None:
            parent.children.append(record.agent_id)
        nodes[record.agent_id] = node
    if stored.root_agent_id not in nodes:  # a root skipped above: its record names a parent
        raise CorruptStoreError(
            f"session {session_id!r}: the record of its root agent {stored.root_agent_id!r} "
            f"names a parent ({by_id[stored.root_agent_id].record.parent_id!r}); the store is "
            "damaged"
        )
    tree.next_position(after=max((e.record.position for e in stored.agents), default=0))
    _restore_ledgers(nodes, contexts)

    # Bottom-up: which agents wait legitimately (own suspension, or a call parked on a child
    # that waits), and what each waiting child has open.
    open_requests: dict[str, tuple[Request, ...]] = {}
    child_parks: dict[str, list[tuple[ToolCall, str]]] = {}
    for agent_id in reversed(list(nodes)):
        ctx = contexts[agent_id]
        own = tuple(Request.model_validate(d["request"]) for d in ctx.suspended.values())
        parked: list[tuple[ToolCall, str]] = []
        requests: list[Request] = list(own)
        if open_turn(ctx) is not None:
            answered = {m.tool_call_id for m in ctx.messages if isinstance(m, ToolResultMessage)}
            calls = {c.id: c for m in ctx.assistant_messages for c in m.tool_calls}
            for event in ctx.events_since(open_turn_start(ctx)):
                if event.type != "subagent_spawned" or event.data.get("delegated"):
                    continue
                call_id, child_id = event.data.get("tool_call_id"), event.data["child_id"]
                if call_id in answered or call_id not in calls:
                    continue
                if open_requests.get(child_id):
                    parked.append((calls[call_id], child_id))
                    requests.extend(
                        r.model_copy(update={"path": (agent_id, *r.path)})
                        for r in open_requests[child_id]
                    )
        child_parks[agent_id] = parked
        open_requests[agent_id] = tuple(requests)
        recover(ctx, waiting=bool(requests))

    # Which agents come back to life, parents before children; their specs must be known.
    live_ids: list[str] = []
    for agent_id, node in nodes.items():
        waiting = bool(open_requests[agent_id])
        is_root = agent_id == stored.root_agent_id
        # A kept child lives as long as its parent: one stopped with its tree (``ref.stop``)
        # comes back with it, or the parent's later calls to it would fail for good.
        kept = _is_kept(contexts, node) and node.parent_id in live_ids
        if waiting:
            node.status = "suspended"
        elif kept or (is_root and node.status in ("running", "suspended")):
            node.status = "idle"
        elif node.status in ("running", "suspended"):
            node.status = "stopped"
        node.keep = kept
        if is_root or waiting or kept:
            live_ids.append(agent_id)
    missing = sorted({nodes[a].name for a in live_ids if nodes[a].spec is _UNKNOWN_SPEC})
    if missing:
        raise AgentDefinitionError(
            f"session {session_id!r} holds agents of specs {missing}, which were not given; "
            "pass them in agents=[...] (specs are matched by name)"
        )
    for agent_id in live_ids:  # before anything starts: a model, and the child's tool_context
        if agent_id in narrowing_failed:
            name, failure = narrowing_failed[agent_id]
            raise UserError(
                f"session {session_id!r}: the tool_context function of subagent {name!r} "
                f"failed for agent {agent_id!r}: {type(failure).__name__}"
            ) from failure
    models = {agent_id: host.resolve_model(nodes[agent_id].spec) for agent_id in live_ids}

    for agent_id, node in nodes.items():
        ctx = contexts[agent_id]
        if activated and agent_id in live_ids:
            woke = ctx._event_at(ctx._record("activated", {"status": node.status}))
            # Subscribers kept through the sleep see it (they are attached to the node below).
            for listener in (listeners or {}).get(agent_id, ()):
                with contextlib.suppress(Exception):  # a broken listener must not stop a wake
                    listener(woke)
        # Events appended by recovery are written before anything new runs.
        node.buffer.extend(ctx.events_since(store.last_seq(session_id, agent_id) + 1))
        if agent_id not in live_ids:
            persist(node)
            host.remember_ended(node)
    started: list[AgentNode] = []
    try:
        for agent_id in live_ids:  # parents before children
            node, ctx = nodes[agent_id], contexts[agent_id]
            node.listeners.extend((listeners or {}).get(agent_id, ()))
            if node.listeners:
                consumers_changed()
            loop = host.new_loop(node, ctx, models[agent_id])
            for call, child_id in child_parks[agent_id]:
                loop.restore_child_park(call, child_id, open_requests[child_id], agent_id)
            if current_observer() is not None:  # parents first: a child's spans find its parent's
                notify_restore(node, ctx.events)
            host.reserve(agent_id)
            host.start(node, loop)
            started.append(node)
    except BaseException:
        for node in reversed(started):  # all or nothing: no half-restored tree stays live
            host.stop_subtree(node, block=True)
        raise
    if not activated:
        for agent_id in nodes:
            # A fork's prefix was delivered by its original outside the tree: only its own
            # agents hear those messages again (and ignore the ones they heard).
            shared = shared_upto(stored.data, agent_id)
            for send, event in _sends(contexts[agent_id].events):
                if event.seq >= shared or send.to in nodes:
                    host.deliver_peer(agent_id, send)
    return nodes[stored.root_agent_id]


def _context_of(
    store: SessionStore,
    session_id: str,
    entry: StoredAgent,
    clock: Clock,
    session_data: Mapping[str, Any],
) -> tuple[AgentContext, int]:
    """An agent's context, from its snapshot when it has one that fits its log.

    Returns the context and the seq its snapshot folded (-1 when it was folded from the whole
    log: its next persist writes a new snapshot, so a snapshot that did not fit is rebuilt).
    The events a fork reads through from its original get the fork's agent ids.
    """
    record = entry.record
    agent_id = record.agent_id

    def renamed(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return rename_events(session_data, agent_id, events)

    if entry.snapshot is None:
        blob = {**entry.context, "events": renamed(entry.context["events"])}
        return AgentContext.deserialize(blob, clock=clock), -1

    def read_before(stop: int) -> list[Event]:
        raws = renamed(store.read_events(session_id, agent_id, stop=stop))
        return [Event.model_validate(raw) for raw in raws]

    ctx = from_snapshot(
        entry.snapshot,
        renamed(entry.context["events"]),
        read_before=read_before,
        agent_id=agent_id,
        name=record.name,
        parent_id=record.parent_id,
        clock=clock,
    )
    if ctx is not None:
        return ctx, int(entry.snapshot["folded"])
    # It does not fit (logged at debug by from_snapshot): the whole log, as without one.
    blob = {**entry.context, "events": renamed(store.read_events(session_id, agent_id))}
    return AgentContext.deserialize(blob, clock=clock), -1


def _restore_ledgers(nodes: Mapping[str, AgentNode], contexts: Mapping[str, AgentContext]) -> None:
    """Rebuild the tree's budget ledgers from its logs (parents come before children).

    Every reservation logged and never settled counts as spent: its request may have been
    sent before the crash, and the provider may have charged for it. A shared budget's store
    is told so too: each hold the log leaves open is settled there at its worst case (a hold
    the store settled before the crash stays as it was).
    """
    for agent_id, node in nodes.items():
        parent = nodes.get(node.parent_id) if node.parent_id else None
        ctx = contexts[agent_id]
        # A log without budget events (the fold knows, a snapshot too) is not read: waking
        # from a snapshot stays as cheap as it is without budgets.
        spawned = budget_of(ctx.events) if parent is None and ctx._budgeted else None
        store = node.tree.store
        outer = parent.ledger if parent is not None else ledger_for(None, spawned, store)
        node.ledger = ledger_for(outer, node.spec.budget, store)
        if node.ledger is not None and ctx._budgeted:
            node.ledger.charge(spend_of(ctx.events))
            if node.ledger.stored:  # what the crash left held in a shared budget's store
                for hold, spent in open_holds(ctx.events):
                    node.ledger.settle_stored_chain(hold, spent)


def _sends(events: Sequence[Event]) -> list[tuple[SendMessage, Event]]:
    """Each logged peer message with its event."""
    logged = [e for e in events if e.type == "message_sent"]
    return list(zip(sends_of(logged), logged, strict=True))


def _is_kept(contexts: Mapping[str, AgentContext], node: AgentNode) -> bool:
    if node.parent_id is None or node.parent_id not in contexts:
        return False
    return node.agent_id in contexts[node.parent_id]._kept_ids  # folded: no event is read


def _subagent_of(
    parent: AgentNode, parent_ctx: AgentContext, child_id: str, name: str
) -> Subagent | None:
    """The parent's subagent that spawned ``child_id``, if the parent's spec has it."""
    spawned = parent_ctx._spawned.get(child_id)  # its first spawn, folded
    if spawned is None:
        return None
    subagent = parent.spec.subagent_map.get(spawned.get("name") or "")
    if subagent is not None and subagent.agent.name == name:
        return subagent
    return None
