"""The runtime's record of one agent of a tree, live or finished."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pykka

from actors._logging import get_logger
from actors.context._events import Event
from actors.loop._agent import Agent
from actors.models._model import StreamDelta

if TYPE_CHECKING:
    from actors.runtime._effects import ApprovalHandler
    from actors.store._protocol import SessionStore

__all__ = ["AgentNode"]

_log = get_logger("actors.runtime")


@dataclass(eq=False)
class AgentNode:
    """The runtime's record of one agent, live or finished (what ``ref.tree()`` reads)."""

    agent_id: str
    name: str
    parent_id: str | None
    root_id: str
    depth: int
    spec: Agent[Any]
    tool_context: Any
    ref: pykka.ActorRef[Any] | None = None
    status: str = "idle"
    step: int = 0
    tool: str | None = None
    keep: bool = False
    children: list[str] = field(default_factory=list)
    listeners: list[Callable[[Any], None]] = field(default_factory=list)
    store: SessionStore | None = None
    session_id: str | None = None
    position: int = 0
    buffer: list[Event] = field(default_factory=list)
    saved_status: str | None = None
    approval_handler: ApprovalHandler | None = None
    counted: bool = False  # counted among its tree's live agents
    run_timeout: float | None = None  # its parent's deadline for each of its runs

    def publish_event(self, event: Event) -> None:
        """An event was appended: buffer it for the store, show it to the listeners."""
        if self.store is not None:
            self.buffer.append(event)
        self._notify(event)

    def publish_delta(self, delta: StreamDelta) -> None:
        """A piece of a streamed reply: listeners only (deltas are never stored)."""
        self._notify(delta)

    def _notify(self, item: Event | StreamDelta) -> None:
        for listener in tuple(self.listeners):
            try:
                listener(item)
            except Exception:  # a broken listener must not break the agent
                _log.exception("event listener failed", agent_id=self.agent_id)

    def wants_deltas(self) -> bool:
        return bool(self.listeners)

    @property
    def alive(self) -> bool:
        return self.ref is not None and self.ref.is_alive()
