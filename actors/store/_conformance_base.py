"""What every part of the conformance suite shares: how a test gets its stores, and its data."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from actors.context._agent_context import AgentContext
from actors.context._events import Event
from actors.context._messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from actors.context._update import ContextUpdate
from actors.context._usage import Usage
from actors.store._protocol import SessionStore
from actors.store._records import AgentRecord

__all__ = ["EPOCH", "ConformanceBase", "counting_clock", "sample_context"]

EPOCH = datetime(2025, 1, 1, tzinfo=UTC)


def counting_clock(start: datetime = EPOCH) -> Callable[[], datetime]:
    """A clock that ticks one millisecond per reading: distinct, ordered, reproducible."""
    ticks = iter(range(1 << 62))
    return lambda: start + timedelta(milliseconds=next(ticks))


def sample_context(agent_id: str = "root", *, parent_id: str | None = None) -> AgentContext:
    """A context whose log holds every kind of event that changes what a restore sees.

    Messages of every role, tool calls and results, a replaced message, metadata updates,
    usage, an open suspension and a user event type.
    """
    ctx = AgentContext(
        agent_id,
        name=f"{agent_id}-spec",
        parent_id=parent_id,
        metadata={"user": {"name": "Ada"}, "notes": []},
        clock=counting_clock(),
    )
    ctx.add_message(SystemMessage(content="You are terse."))
    ctx.log_event("turn_start", {"run_id": "run-1"})
    ctx.add_message(UserMessage(content="Look up the weather, then note it."))
    ctx.increment_iteration()
    call = ToolCall(id="call-1", name="weather", arguments={"city": "Paris", "days": [1, 2]})
    ctx.add_message(AssistantMessage(content="", tool_calls=(call,)))
    ctx.add_usage(Usage(requests=1, input_tokens=120, output_tokens=14))
    ctx.add_tool_call(call)
    ctx.add_message(
        ToolResultMessage(tool_call_id="call-1", tool_name="weather", content="Sunny, 21.5°C")
    )
    ctx.apply_update(
        ContextUpdate()
        .append("notes", "sunny in Paris")
        .merge("user", {"city": "Paris"})
        .log_event("app.note", {"text": "weather checked", "score": 0.75})
    )
    ctx.replace_message(1, UserMessage(content="Weather in Paris?"))
    approval = ToolCall(id="call-2", name="approve", arguments={})
    ctx.add_message(AssistantMessage(content="Asking.", tool_calls=(approval,)))
    ctx.log_event(
        "suspended",
        {
            "request": {"id": "req-1", "kind": "approval", "prompt": "Send it?"},
            "tool_call": approval.model_dump(mode="json"),
        },
    )
    return ctx


class ConformanceBase(ABC):
    """How the tests get their stores (`make_store`, `make_peer`) and their data."""

    @abstractmethod
    def make_store(self, tmp_path: Path) -> SessionStore:
        """Return a new, empty store; ``tmp_path`` is a fresh directory it may use."""

    @abstractmethod
    def make_peer(self, store: SessionStore, tmp_path: Path) -> SessionStore:
        """Return a second store instance on the same sessions as ``store``.

        As another process would open it: the same file, database or shared memory, with
        holds of its own. ``tmp_path`` is the directory given to `make_store`.
        """

    @pytest.fixture
    def peer(self, store: SessionStore, tmp_path: Path) -> Iterator[SessionStore]:
        """A second instance on the same sessions as ``store``, closed after the test."""
        peer = self.make_peer(store, tmp_path)
        try:
            yield peer
        finally:
            peer.close()

    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[SessionStore]:
        """A new store, closed after the test."""
        store = self.make_store(tmp_path)
        try:
            yield store
        finally:
            store.close()

    # -- helpers ----------------------------------------------------------------------------

    @staticmethod
    def _session(store: SessionStore, session_id: str = "s1", *agents: str) -> None:
        root = agents[0] if agents else "root"
        store.create_session(session_id, root_agent_id=root, data={"spec": "assistant"})
        for position, agent_id in enumerate(agents or ("root",)):
            parent = None if position == 0 else root
            store.put_agent(session_id, AgentRecord(agent_id, parent, "spec", "idle", position))

    @staticmethod
    def _events(agent_id: str, first: int, count: int, tag: str = "") -> list[Event]:
        return [
            Event(
                seq=seq,
                type="app.step",
                data={"agent": agent_id, "n": seq, "tag": tag},
                created_at=EPOCH + timedelta(seconds=seq),
            )
            for seq in range(first, first + count)
        ]
