"""Small helpers shared by the agent-loop tests."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from actors import Event, Message, ToolResultMessage

# Every wait in these tests has this bound, so a bug fails a test instead of hanging it.
BOUND = 10.0


def types(events: Iterable[Event]) -> list[str]:
    """The event types, in order."""
    return [e.type for e in events]


def plain(events: Iterable[Event]) -> list[tuple[str, dict[str, Any]]]:
    """Events without their timestamps (which come from the clock)."""
    return [(e.type, e.data) for e in events]


def tool_results(messages: Iterable[Message]) -> list[ToolResultMessage]:
    """The tool results of a transcript, in order."""
    return [m for m in messages if isinstance(m, ToolResultMessage)]
