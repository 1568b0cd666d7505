"""Closing, in the store, the runs of a subtree whose host died."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from actors.context._agent_context import AgentContext
from actors.loop._peers import sends_of
from actors.loop._recovery import open_turn, recover
from actors.loop._types import SendMessage
from actors.store._fences import fence

if TYPE_CHECKING:
    from actors.store._protocol import SessionStore
    from actors.store._records import StoredAgent

__all__ = ["close_lost"]


def close_lost(
    store: SessionStore, session_id: str, agent_id: str
) -> list[tuple[str, SendMessage]]:
    """Close, in the store, the interrupted runs of an agent and its descendants.

    They lived on a host that died (or stopped answering): they are fenced first (this store
    instance is their only writer from now on), then each open turn is recovered as a restore
    would (tool calls without a result are classified "not started" or "outcome unknown"), and
    the agent is recorded ``failed``.

    Returns:
        The peer messages the subtree's logs hold as sent, with their senders: to send again,
        since the host that died may not have delivered them (a receiver drops what it heard).
    """
    # Taken over first: should the host that ran them still run (paused, cut off), it writes
    # none of them from now on, and starts no run of them. Loaded again after the fence, for
    # an agent that host spawned meanwhile: once the subtree holds no agent left unfenced,
    # nothing more is written to it but here.
    fenced: set[str] = set()
    while True:
        stored = store.load(session_id)
        below = _subtree(stored.agents, agent_id)
        if below <= fenced:
            break
        fence(store, session_id, sorted(below - fenced))
        fenced |= below
    sends: list[tuple[str, SendMessage]] = []
    for entry in stored.agents:
        record = entry.record
        if record.agent_id not in below:
            continue
        ctx = AgentContext.deserialize(entry.context)
        sends += [(record.agent_id, send) for send in sends_of(ctx.events)]
        if open_turn(ctx) is None and record.status in ("finished", "failed", "cancelled"):
            continue
        before = len(ctx.events)
        recover(ctx, waiting=False)
        fresh = ctx.events[before:]
        if fresh:
            store.append_events(session_id, record.agent_id, fresh)
        if record.status not in ("finished", "failed", "cancelled"):
            store.put_agent(session_id, dataclasses.replace(record, status="failed"))
    return sends


def _subtree(agents: Sequence[StoredAgent], agent_id: str) -> set[str]:
    """The ids of an agent and its descendants (parents are listed before their children)."""
    below = {agent_id}
    for entry in agents:
        if entry.record.parent_id in below:
            below.add(entry.record.agent_id)
    return below
