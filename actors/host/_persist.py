"""Writing an agent's new events and status to its tree's store, and snapshots of its fold."""

from __future__ import annotations

from typing import Final

from actors._logging import get_logger
from actors.context._agent_context import AgentContext
from actors.context._snapshot import take_snapshot
from actors.host._node import AgentNode
from actors.store._records import AgentRecord

__all__ = [
    "AT_PASSIVATION",
    "SNAPSHOT_EVERY",
    "check_snapshot_every",
    "persist",
    "record_of",
    "snapshot_if_due",
]

SNAPSHOT_EVERY: Final = 1000
"""By default an agent's fold is snapshotted after every this many events it logs."""

AT_PASSIVATION: Final = 64
"""Passivation snapshots an agent that logged at least this many events (or ``every``, if
fewer) since its last snapshot: the wake reads the snapshot and no more than these."""

_log = get_logger("actors.runtime")


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


def check_snapshot_every(every: object) -> int | None:
    """``snapshot_every`` of a host, checked: a positive int, or None (no snapshots).

    Raises:
        UserError: anything else.
    """
    from actors.exceptions import UserError

    if every is None:
        return None
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise UserError(f"snapshot_every takes a positive number of events, or None, got {every!r}")
    return every


def snapshot_if_due(
    node: AgentNode, ctx: AgentContext, every: int | None, *, passivating: bool = False
) -> None:
    """Write a snapshot of the agent's fold when enough events came since its last one.

    Only once every event is written (a snapshot never stands for an event the store lacks).
    A snapshot is a shortcut: a store that fails to take one is logged, and nothing else.
    """
    store, session_id = node.tree.store, node.tree.session_id
    if every is None or store is None or session_id is None or node.buffer:
        return
    last = ctx.event_count - 1
    due = min(every, AT_PASSIVATION) if passivating else every
    if last - node.snapshot_seq < due:
        return
    try:
        store.put_snapshot(session_id, node.agent_id, take_snapshot(ctx))
    except Exception:
        _log.warning("could not write a snapshot", agent_id=node.agent_id, exc_info=True)
        return
    node.snapshot_seq = last
