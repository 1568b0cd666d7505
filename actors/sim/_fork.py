"""`Simulation.fork`: the simulation's agents, at the current virtual time, in a new simulation.

Each root tree's logs are written to a scratch `MemoryStore` and brought up in the new
simulation by the restore `Runtime.fork` uses: nothing runs again, and what was in flight now
(a model request or a tool call whose reply lies in the future of the virtual clock) is decided
as after a crash (not started, or outcome unknown). The new simulation starts at the same
virtual time, with its own seed and settings, so the what-if it runs is reproducible too.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from actors.exceptions import UserError
from actors.host import AgentCell, AgentNode, Tombstone, persist, restore_tree
from actors.loop._agent import Agent
from actors.loop._loop import AgentLoop
from actors.store._memory import MemoryStore
from actors.store._records import AgentRecord

if TYPE_CHECKING:
    from actors.context._agent_context import AgentContext
    from actors.context._events import Clock
    from actors.loop._loop import TreeLimits
    from actors.loop._toolset_host import ToolsetHost
    from actors.loop._types import SendMessage
    from actors.models._model import Model
    from actors.sim._host import SimHost

__all__ = ["copy_trees", "KEEP"]

KEEP: Any = object()
"""``tool_context`` of `Simulation.fork` when not given: a deep copy of each root's."""


class _Restoring:
    """The `RestoreHost` face of a `SimHost`: restored agents become its cells."""

    exclusive = False
    snapshot_every = None

    def __init__(self, host: SimHost) -> None:
        self.host = host

    @property
    def clock(self) -> Clock:
        return self.host.clock

    @property
    def limits(self) -> TreeLimits:
        return self.host.limits

    @property
    def toolsets(self) -> ToolsetHost | None:
        return self.host.toolsets

    def taken(self, agent_id: str) -> bool:
        return agent_id in self.host.cells

    def reserve(self, agent_id: str) -> None:
        if self.taken(agent_id):
            raise UserError(f"agent id {agent_id!r} is taken in this simulation")

    def resolve_model(self, spec: Agent[Any]) -> Model:
        return self.host.resolve_model(spec)

    def new_loop(
        self, node: AgentNode, context: AgentContext, model: Model | None = None
    ) -> AgentLoop:
        return self.host.new_loop(node, context, model)

    def start(self, node: AgentNode, loop: AgentLoop) -> None:
        host, agent_id = self.host, node.agent_id
        if not node.counted:
            node.tree.live += 1
            node.counted = True
        cell = AgentCell(host, node, loop, lambda message: host.tell(agent_id, message))
        node.status = loop.status
        host.cells[agent_id] = cell
        if host.record:
            loop.ctx._set_tap(host.log, agent_id)
        persist(node)

    def stop_subtree(self, node: AgentNode, *, block: bool) -> None:
        for agent_id in [node.agent_id, *node.children]:
            self.host.cells.pop(agent_id, None)

    def remember_ended(self, node: AgentNode) -> None:
        node.tree.remember(Tombstone.of(node))

    def peer_exists(self, agent_id: str) -> bool:
        return self.host.peer_exists(agent_id)

    def deliver_peer(self, sender: str, effect: SendMessage) -> None:
        from actors.loop._types import PeerMessage

        if effect.to in self.host.cells:
            message = PeerMessage(effect.message_id, effect.n, sender, effect.content)
            self.host.tell(effect.to, message)


def copy_trees(source: SimHost, target: SimHost, tool_context: Any) -> list[str]:
    """Bring every root tree of ``source`` up in ``target``; returns the root ids.

    Raises:
        UserError: A root's ``tool_context`` cannot be deep-copied (pass one).
    """
    roots = [cell.node for cell in source.cells.values() if cell.node.parent_id is None]
    restoring = _Restoring(target)
    ids = []
    with MemoryStore() as scratch:
        for root in roots:
            tree = [c for c in source.cells.values() if c.node.tree is root.tree]
            scratch.create_session(root.agent_id, root_agent_id=root.agent_id)
            specs: dict[str, Agent[Any]] = {}
            for cell in sorted(tree, key=lambda c: c.node.position):
                node = cell.node
                specs.setdefault(node.spec.name, node.spec)
                record = AgentRecord(
                    node.agent_id, node.parent_id, node.name, node.status, node.position
                )
                scratch.append_events(
                    root.agent_id, node.agent_id, cell.loop.ctx.events, record=record
                )
            if tool_context is KEEP:
                try:
                    context = copy.deepcopy(root.tool_context)
                except Exception as exc:
                    raise UserError(
                        f"fork: the tool_context of {root.agent_id!r} cannot be copied "
                        f"({type(exc).__name__}); pass the fork's world: sim.fork(tool_context=...)"
                    ) from exc
            else:
                context = tool_context
            node = restore_tree(
                restoring,
                root.agent_id,
                store=scratch,
                agents=specs,
                tool_context=context,
            )
            node.tree.store = None  # a simulation's trees have no store
            node.tree.session_id = None
            ids.append(node.agent_id)
    return ids
