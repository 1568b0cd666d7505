"""Closing, in the store, the runs of a subtree whose host died."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from actors.context._agent_context import AgentContext
from actors.loop._recovery import open_turn, recover

if TYPE_CHECKING:
    from actors.store._protocol import SessionStore

__all__ = ["close_lost"]


def close_lost(store: SessionStore, session_id: str, agent_id: str) -> list[str]:
    """Close, in the store, the interrupted runs of an agent and its descendants.

    They lived on a host that died: each open turn is recovered as a restore would (tool calls
    without a result are classified "not started" or "outcome unknown"), and the agent is
    recorded ``failed``. Returns the ids it closed.
    """
    stored = store.load(session_id)
    below: set[str] = {agent_id}
    closed: list[str] = []
    for entry in stored.agents:  # parents come before their children
        record = entry.record
        if record.agent_id != agent_id and record.parent_id not in below:
            continue
        below.add(record.agent_id)
        ctx = AgentContext.deserialize(entry.context)
        if open_turn(ctx) is None and record.status in ("finished", "failed", "cancelled"):
            continue
        before = len(ctx.events)
        recover(ctx, waiting=False)
        fresh = ctx.events[before:]
        if fresh:
            store.append_events(session_id, record.agent_id, fresh)
        if record.status not in ("finished", "failed", "cancelled"):
            store.put_agent(session_id, dataclasses.replace(record, status="failed"))
        closed.append(record.agent_id)
    return closed
