"""Rebuilding a persisted agent tree: contexts from the store, crash recovery, live actors."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from actors.context._agent_context import AgentContext
from actors.context._messages import ToolCall, ToolResultMessage
from actors.context._suspension import Request
from actors.exceptions import AgentDefinitionError, SerializationError, UserError
from actors.loop._agent import Agent
from actors.loop._loop import AgentLoop
from actors.loop._recovery import open_turn, recover
from actors.runtime._effects import ApprovalHandler
from actors.store._protocol import SessionStore

if TYPE_CHECKING:
    from actors.runtime._node import AgentNode
    from actors.runtime._ref import AgentRef
    from actors.runtime._runtime import Runtime

__all__ = ["restore_tree"]


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
    runtime: Runtime,
    session_id: str,
    *,
    store: SessionStore,
    agents: Sequence[Agent[Any]] | Mapping[str, Agent[Any]],
    tool_context: Any = None,
    approval_handler: ApprovalHandler | None = None,
) -> AgentRef:
    """See `Runtime.restore`."""
    from actors.runtime._node import AgentNode
    from actors.runtime._ref import AgentRef

    stored = store.load(session_id)
    specs = _spec_index(agents)
    missing = sorted({a.record.name for a in stored.agents} - set(specs))
    if missing:
        raise AgentDefinitionError(
            f"session {session_id!r} holds agents of specs {missing}, which were not given; "
            "pass them in agents=[...] (specs are matched by name)"
        )
    # Agent ids name actors in a runtime: a second agent under the same id would replace the
    # first in the runtime's records, and that actor would outlive the runtime.
    taken = sorted(
        {a.record.agent_id for a in stored.agents} & {n.agent_id for n in runtime.nodes()}
    )
    if taken:
        raise UserError(
            f"session {session_id!r} holds agents {taken}, and this runtime already has agents "
            "of those ids; restore it in another Runtime"
        )
    contexts: dict[str, AgentContext] = {}
    nodes: dict[str, AgentNode] = {}
    for entry in stored.agents:
        record = entry.record
        parent = nodes.get(record.parent_id) if record.parent_id else None
        # Two subagents may run specs of one name: the parent's call says which one it was.
        spec = (
            _subagent_spec(parent, contexts[parent.agent_id], record.agent_id, record.name)
            if parent is not None
            else None
        ) or specs[record.name]
        try:
            ctx = AgentContext.deserialize(entry.context, clock=runtime.clock)
        except SerializationError as exc:  # only the restore knows which session it was
            raise SerializationError(f"session {session_id!r}: {exc}") from None
        ctx.max_iterations = spec.max_iterations
        contexts[record.agent_id] = ctx
        node = AgentNode(
            record.agent_id,
            record.name,
            record.parent_id,
            parent.root_id if parent else record.agent_id,
            parent.depth + 1 if parent else 0,
            spec,
            tool_context,
            store=store,
            session_id=session_id,
            position=record.position,
            status=record.status,
            saved_status=record.status,
            approval_handler=approval_handler,
        )
        if parent is not None:
            parent.children.append(record.agent_id)
        nodes[record.agent_id] = node
    if stored.root_agent_id not in nodes:
        raise AgentDefinitionError(f"session {session_id!r} has no root agent record")

    # Bottom-up: which agents wait legitimately (own suspension, or a call parked on a child
    # that waits), and what each waiting child has open.
    open_requests: dict[str, tuple[Request, ...]] = {}
    child_parks: dict[str, list[tuple[ToolCall, str]]] = {}
    for entry in reversed(stored.agents):
        agent_id = entry.record.agent_id
        ctx = contexts[agent_id]
        own = tuple(Request.model_validate(d["request"]) for d in ctx.suspended.values())
        parked: list[tuple[ToolCall, str]] = []
        requests: list[Request] = list(own)
        if open_turn(ctx) is not None:
            answered = {m.tool_call_id for m in ctx.messages if isinstance(m, ToolResultMessage)}
            calls = {c.id: c for m in ctx.assistant_messages for c in m.tool_calls}
            for event in ctx.events:
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

    live_ids: set[str] = set()
    for entry in stored.agents:  # parents before children
        agent_id = entry.record.agent_id
        node, ctx = nodes[agent_id], contexts[agent_id]
        # Events appended by recovery are written before anything new runs.
        node.buffer.extend(ctx.events[store.last_seq(session_id, agent_id) + 1 :])
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
        live = is_root or waiting or kept
        if live:
            live_ids.add(agent_id)
        else:
            with runtime.lock:
                runtime.register(node)
            runtime.persist(node)
            continue
        loop = AgentLoop(
            node.spec,
            ctx,
            model=runtime.resolve_model(node.spec),
            tool_context=tool_context,
            depth=node.depth,
            limits=runtime.limits,
            approval_handler=approval_handler is not None,
        )
        for call, child_id in child_parks[agent_id]:
            loop.restore_child_park(call, child_id, open_requests[child_id], agent_id)
        node.keep = kept
        runtime.start_node(node, loop)
    return AgentRef(runtime, nodes[stored.root_agent_id])


def _is_kept(contexts: Mapping[str, AgentContext], node: AgentNode) -> bool:
    if node.parent_id is None or node.parent_id not in contexts:
        return False
    return any(
        e.type == "subagent_spawned"
        and e.data.get("child_id") == node.agent_id
        and e.data.get("keep")
        for e in contexts[node.parent_id].events
    )


def _subagent_spec(
    parent: AgentNode, parent_ctx: AgentContext, child_id: str, name: str
) -> Agent[Any] | None:
    """The spec of the parent's subagent that spawned ``child_id``, if the parent's spec has it."""
    for event in parent_ctx.events:
        if event.type == "subagent_spawned" and event.data.get("child_id") == child_id:
            subagent = parent.spec.subagent_map.get(event.data.get("name", ""))
            if subagent is not None and subagent.agent.name == name:
                return subagent.agent
            return None
    return None
