"""`Event`, one entry of an agent's log, with its known types, and the clock that stamps events."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final

from pydantic import BaseModel, ConfigDict

__all__ = [
    "BOOKKEEPING_TYPES",
    "COMPACTED",
    "Clock",
    "Event",
    "REPLACE",
    "SURFACE_TYPES",
    "is_custom_type",
    "is_known_type",
    "system_clock",
]

Clock = Callable[[], datetime]
"""Where timestamps come from: a function returning an aware datetime. Injectable for tests."""


def system_clock() -> datetime:
    """The wall clock, in UTC."""
    return datetime.now(UTC)


SURFACE_TYPES: Final = frozenset(
    {"system_message", "user_message", "assistant_message", "tool_result"}
)
"""Event types that project to a message of the transcript."""

REPLACE: Final = "replace"
"""The event type that shadows an inclusive range of message positions with one message."""

COMPACTED: Final = "compacted"
"""The event type that shadows the oldest part of a transcript with a summary (compaction).

Like ``replace``, it keeps every message in the log: positions ``first..last`` give way to
its ``message`` (the summary), followed by the messages of the range that stay (``kept``:
pinned ones), in order."""

BOOKKEEPING_TYPES: Final = frozenset(
    {
        "turn_start",
        "turn_end",
        "step_start",
        "step_end",
        "tool_call",
        "request_header",
        "context_update",
        "usage",
        "budget_set",
        "budget_reserved",
        "budget_settled",
        "subagent_spawned",
        "subagent_finished",
        "suspended",
        "resumed",
        "cancelled",
        "error",
        "steered",
        "recovered",
        "passivated",
        "activated",
        "model_fallback",
        "message_sent",
        "message_received",
    }
)
"""Framework event types that project to no message."""

_CUSTOM = re.compile(r"^[A-Za-z_][\w-]*(\.[A-Za-z_][\w-]*)+$")


def is_custom_type(event_type: str) -> bool:
    """Whether ``event_type`` is a user event type: namespaced with a dot, like ``app.note``."""
    return isinstance(event_type, str) and _CUSTOM.fullmatch(event_type) is not None


def is_known_type(event_type: str) -> bool:
    """Whether a log may hold an event of this type."""
    return (
        event_type in SURFACE_TYPES
        or event_type in BOOKKEEPING_TYPES
        or event_type in (REPLACE, COMPACTED)
        or is_custom_type(event_type)
    )


class Event(BaseModel):
    """One entry of an agent's append-only log.

    Attributes:
        seq: The event's index in its agent's log (0, 1, 2, ... with no gaps).
        type: What happened. Surface types project to messages, ``replace`` shadows a range of
            messages (``compacted`` with a summary), every other type is bookkeeping. User
            types are namespaced (``app.note``).
        data: The event's payload, plain JSON. Treat it as read-only: the log shares it.
        created_at: When it was appended, from the context's clock.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    seq: int
    type: str
    data: dict[str, Any]
    created_at: datetime

    @property
    def is_surface(self) -> bool:
        """Whether this event projects to a message."""
        return self.type in SURFACE_TYPES
