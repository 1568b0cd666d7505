"""Issue 12, finding 9: damaged store rows raise `CorruptStoreError`, and values nested deeper
than the documented limit (200 levels) are refused with a typed error wherever they enter."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from actors import Agent, AgentContext, ContextUpdate, LoggedEvent, Pending, Request, Runtime
from actors.context._json import MAX_DEPTH
from actors.exceptions import (
    CorruptStoreError,
    InvalidUpdateError,
    SerializationError,
    UserError,
)
from actors.store import AgentRecord, MemoryStore, SQLiteStore
from actors.testing import ScriptedModel, call

DEEP = 5000


def nested(depth: int) -> Any:
    """A value of ``depth`` nested containers (lists and dicts, alternating)."""
    value: Any = 1
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


@pytest.fixture
def path(tmp_path: Path) -> Path:
    path = tmp_path / "sessions.sqlite"
    with SQLiteStore(path) as store, Runtime() as runtime:
        agent = Agent("a", model=ScriptedModel(["hello"]))
        runtime.spawn(agent, store=store, session_id="s1").run("hi", timeout=10)
        store.create_session("s2", root_agent_id="b", data={"title": "fine"})
    return path


def damage(path: Path, sql: str, *args: Any) -> None:
    conn = sqlite3.connect(path)
    conn.execute(sql, args)
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    ("sql", "args"),
    [
        ("UPDATE sessions SET data = ? WHERE session_id = 's1'", ("{not json",)),
        ("UPDATE sessions SET data = ? WHERE session_id = 's1'", ("[1, 2]",)),
        ("UPDATE sessions SET data = ? WHERE session_id = 's1'", ("[" * DEEP + "]" * DEEP,)),
        ("UPDATE sessions SET data = ? WHERE session_id = 's1'", (7,)),
        ("UPDATE sessions SET created_at = ? WHERE session_id = 's1'", ("yesterday",)),
        ("UPDATE sessions SET updated_at = ? WHERE session_id = 's1'", (1700000000,)),
        ("UPDATE sessions SET root_agent_id = ? WHERE session_id = 's1'", ("",)),
    ],
)
def test_a_damaged_session_row_is_a_corrupt_store_error_on_load_and_list(
    path: Path, sql: str, args: tuple[Any, ...]
) -> None:
    damage(path, sql, *args)
    with SQLiteStore(path) as store:
        with pytest.raises(CorruptStoreError, match=r"damaged.*session 's1'"):
            store.load("s1")
        with pytest.raises(CorruptStoreError, match=r"damaged.*session 's1'"):
            store.list_sessions()
        assert store.load("s2").data == {"title": "fine"}  # the other sessions stay readable


@pytest.mark.parametrize(
    ("sql", "args"),
    [
        ("UPDATE events SET data = ? WHERE seq = 1", ("[" * DEEP + "]" * DEEP,)),
        ("UPDATE events SET data = ? WHERE seq = 1", ('{"seq": 1,',)),
        ("UPDATE events SET data = ? WHERE seq = 1", (12,)),
        ("UPDATE agents SET name = ? WHERE agent_id = 'a'", ("",)),
        ("UPDATE agents SET position = ? WHERE agent_id = 'a'", ("first",)),
    ],
)
def test_a_damaged_agent_or_event_row_is_a_corrupt_store_error(
    path: Path, sql: str, args: tuple[Any, ...]
) -> None:
    damage(path, sql, *args)
    with SQLiteStore(path) as store, pytest.raises(CorruptStoreError, match="agent 'a'"):
        store.load("s1")
    with SQLiteStore(path) as store, Runtime() as runtime:
        with pytest.raises(CorruptStoreError):
            runtime.restore("s1", store=store, agents=[Agent("a")])
        assert runtime.live_agents() == 0


def test_an_event_nested_too_deeply_but_readable_is_refused_on_restore(path: Path) -> None:
    deep = '{"deep": ' + "[" * 300 + "]" * 300 + "}"
    damage(path, "UPDATE events SET data = ? WHERE seq = 1", deep)
    with (
        SQLiteStore(path) as store,
        Runtime() as runtime,
        pytest.raises(SerializationError, match=r"session 's1': agent 'a': event 1"),
    ):
        runtime.restore("s1", store=store, agents=[Agent("a")])


def test_deep_metadata_is_a_typed_error_from_spawn_and_changes_nothing() -> None:
    with Runtime() as runtime:
        with pytest.raises(UserError, match=f"more than {MAX_DEPTH} levels deep"):
            runtime.spawn(Agent("a", model=ScriptedModel(["x"])), metadata={"k": nested(DEEP)})
        assert runtime.live_agents() == 0
        ref = runtime.spawn(Agent("a", model=ScriptedModel(["x"])))  # the id is still free
        assert ref.agent_id == "a"


@pytest.mark.parametrize(
    "build",
    [
        lambda v: ContextUpdate().set("k", v),
        lambda v: ContextUpdate().merge("k", {"v": v}),
        lambda v: ContextUpdate().append("k", v),
        lambda v: ContextUpdate().log_event("app.note", {"v": v}),
        lambda v: LoggedEvent("app.note", {"v": v}),
    ],
)
def test_a_deep_value_in_an_update_is_an_invalid_update_error(build: Any) -> None:
    with pytest.raises(InvalidUpdateError, match="levels deep"):
        build(nested(DEEP))


def test_the_depth_limit_is_exactly_two_hundred_levels_and_what_it_accepts_persists() -> None:
    ContextUpdate().set("k", nested(MAX_DEPTH))
    with pytest.raises(InvalidUpdateError, match=f"more than {MAX_DEPTH} levels deep"):
        ContextUpdate().set("k", nested(MAX_DEPTH + 1))

    @tool_returning(ContextUpdate().set("deep", nested(MAX_DEPTH)))
    def keep() -> None: ...

    agent = Agent("a", model=ScriptedModel([call("keep"), "done"]), tools=[keep])
    with MemoryStore() as store:
        with Runtime() as runtime:
            runtime.spawn(agent, store=store, session_id="s").run("go", timeout=10)
        with Runtime() as runtime:
            restored = runtime.restore("s", store=store, agents=[agent])
            assert restored.context().metadata["deep"] == nested(MAX_DEPTH)


def tool_returning(update: ContextUpdate) -> Any:
    from actors import tool

    def decorate(function: Any) -> Any:
        @tool(name=function.__name__)
        def returning() -> ContextUpdate:
            """Return the update."""
            return update

        return returning

    return decorate


def test_a_request_with_data_that_cannot_be_stored_fails_in_the_tool() -> None:
    from actors import tool

    @tool
    def ask() -> Any:
        """Ask with an unstorable payload."""
        return Pending(Request(prompt="q", data=nested(DEEP)))

    agent = Agent("a", model=ScriptedModel([call("ask"), "done"]), tools=[ask])
    with MemoryStore() as store, Runtime() as runtime:
        result = runtime.spawn(agent, store=store, session_id="s").run("go", timeout=10)
        assert result.output == "done"  # the tool failed; the agent and its store went on
        (message,) = [m for m in result.messages if m.role == "tool"]
        assert "levels deep" in message.content


def test_a_store_refuses_what_it_could_not_read_back() -> None:
    from actors.context._events import Event

    with MemoryStore() as store:
        with pytest.raises(UserError, match="session data"):
            store.create_session("s", root_agent_id="a", data={"v": nested(DEEP)})
        store.create_session("s", root_agent_id="a")
        store.put_agent("s", AgentRecord("a", None, "a", "idle"))
        event = Event(seq=0, type="app.note", data={"v": nested(300)}, created_at=datetime.now(UTC))
        with pytest.raises(UserError, match="levels deep"):
            store.append_events("s", "a", [event])
        assert store.last_seq("s", "a") == -1


def test_deserialize_refuses_a_deep_blob_with_a_serialization_error() -> None:
    event = {
        "seq": 0,
        "type": "app.note",
        "data": {"v": nested(DEEP)},
        "created_at": datetime.now(UTC).isoformat(),
    }
    with pytest.raises(SerializationError, match=r"agent 'a': event 0 \(app.note\).*levels deep"):
        AgentContext.deserialize({"version": 2, "agent_id": "a", "events": [event]})
    with pytest.raises(SerializationError, match="levels deep"):
        AgentContext.deserialize({"version": 1, "messages": [], "metadata": {"k": nested(DEEP)}})
