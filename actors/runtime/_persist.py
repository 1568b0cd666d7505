"""Writing an agent's new events and status to its tree's store."""

from __future__ import annotations

from actors.runtime._node import AgentNode
from actors.store._records import AgentRecord

__all__ = ["persist", "record_of"]


def record_of(node: AgentNode) -> AgentRecord:
    """The store's record of an agent."""
    return AgentRecord(node.agent_id, node.parent_id, node.name, node.status, node.position)


def persist(node: AgentNode) -> None:
    """Write the agent's buffered events (one transaction) and its status, if it has a store.

    Called after each input the agent handles (a step) and before any result is reported, so
    a reported result is always on disk.

    Raises:
        StoreError: the store failed; the events stay buffered for the next attempt.
    """
    store, session_id = node.tree.store, node.tree.session_id
    if store is None or session_id is None:
        return
    # A new agent, or a new status, goes with the events in one write when there are some.
    record = record_of(node) if node.status != node.saved_status else None
    if node.buffer:
        batch = list(node.buffer)
        store.append_events(session_id, node.agent_id, batch, record=record)
        del node.buffer[: len(batch)]
    elif record is not None:
        store.put_agent(session_id, record)
    if record is not None:
        node.saved_status = record.status
