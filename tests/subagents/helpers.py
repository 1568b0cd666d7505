"""Small helpers shared by the subagent tests."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from actors import Event, Message, Runtime, ToolResultMessage

BOUND = 10.0


def tool_results(messages: Iterable[Message]) -> list[ToolResultMessage]:
    return [m for m in messages if isinstance(m, ToolResultMessage)]


def events_of(events: Iterable[Event], kind: str) -> list[dict[str, Any]]:
    return [e.data for e in events if e.type == kind]


def wait_stopped(rt: Runtime, *agent_ids: str) -> None:
    """Wait until each agent's actor has stopped (its thread released)."""
    for agent_id in agent_ids:
        node = rt._host.nodes.get(agent_id)
        if node is None:
            continue  # stopped and forgotten already
        assert node.ref.actor_stopped.wait(BOUND), f"{agent_id} is still running"
