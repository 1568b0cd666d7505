"""Virtual agents: idle trees sleep in their stores and wake on the next message."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from actors import (
    Agent,
    Answer,
    Event,
    Pending,
    Request,
    RunContext,
    Runtime,
    Subagent,
    UserMessage,
    tool,
)
from actors.exceptions import AgentStoppedError, UserError
from actors.host import _persist
from actors.store import MemoryStore, SQLiteStore
from actors.testing import ScriptedModel, call

BOUND = 30.0


@pytest.fixture(autouse=True, params=["from-log", "from-snapshot"])
def _wake(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test twice: agents woken by folding their logs, and from snapshots.

    These agents log a few events each, fewer than passivation needs to write a snapshot by
    default; "from-snapshot" has every passivation write one, so every wake reads it.
    """
    if request.param == "from-snapshot":
        monkeypatch.setattr(_persist, "AT_PASSIVATION", 1)


def _chat(name: str = "chat") -> Agent[Any]:
    return Agent(name, model=ScriptedModel(["one", "two", "three"], per_agent=True))


def _types(ref: Any) -> list[str]:
    return [e.type for e in ref.context().events]


def test_idle_after_needs_a_store() -> None:
    with Runtime(idle_after=60) as rt, pytest.raises(UserError, match="store"):
        rt.spawn(_chat())


def test_a_passivated_agent_wakes_with_its_memory_on_the_next_run() -> None:
    with MemoryStore() as store, Runtime() as rt:
        ref = rt.spawn(_chat(), store=store)
        assert ref.run("hello", timeout=BOUND).output == "one"
        assert ref.passivate()
        assert rt.live_agents() == 0
        assert ref.status == "idle"
        second = ref.run("again", timeout=BOUND)
        assert second.output == "two"
        assert [m.content for m in second.messages] == ["hello", "one", "again", "two"]
        assert rt.live_agents() == 1
        types = _types(ref)
    assert types.index("passivated") < types.index("activated")


def test_a_suspended_run_is_resumed_after_its_agent_slept() -> None:
    @tool
    def confirm(ctx: RunContext[Any]) -> Any:
        """Ask the user to confirm."""
        if ctx.answer is None:
            return Pending(Request(kind="confirm", prompt="sure?"))
        return f"confirmed: {ctx.answer.ok}"

    agent = Agent("c", model=ScriptedModel([call("confirm"), "done"]), tools=[confirm])
    with MemoryStore() as store, Runtime() as rt:
        ref = rt.spawn(agent, store=store)
        suspended = ref.run("go", timeout=BOUND)
        assert suspended.status == "suspended"
        assert ref.passivate()  # a suspended run counts as idle
        assert rt.live_agents() == 0
        assert ref.status == "suspended"
        (request,) = suspended.requests
        result = ref.resume({request.id: Answer(ok=True)}, timeout=BOUND)
    assert result.output == "done"
    assert result.messages[-2].content == "confirmed: True"


def test_steering_and_context_queries_wake_a_sleeping_agent() -> None:
    with MemoryStore() as store, Runtime() as rt:
        ref = rt.spawn(_chat(), store=store)
        ref.run("hello", timeout=BOUND)
        assert ref.passivate()
        ref.send("by the way")
        contents = [m.content for m in ref.context().messages]
        assert contents == ["hello", "one", "by the way"]
        assert ref.passivate()
        assert [m.content for m in ref.context().messages][-1] == "by the way"


def test_messages_sent_while_it_wakes_keep_their_order() -> None:
    with MemoryStore() as store, Runtime() as rt:
        ref = rt.spawn(_chat(), store=store)
        ref.run("hello", timeout=BOUND)
        assert ref.passivate()
        for i in range(50):
            ref.send(f"m{i}")
        steered = [m.content for m in ref.context().messages if isinstance(m, UserMessage)]
    assert steered == ["hello", *[f"m{i}" for i in range(50)]]


def test_a_kept_child_sleeps_and_wakes_with_its_parent() -> None:
    helper = Subagent(Agent("helper", model=ScriptedModel(["h1", "h2"])), keep=True)
    lead = Agent(
        "lead",
        model=ScriptedModel([call("helper", task="a"), "first", call("helper", task="b"), "2nd"]),
        subagents=[helper],
    )
    with MemoryStore() as store, Runtime() as rt:
        ref = rt.spawn(lead, store=store)
        assert ref.run("go", timeout=BOUND).output == "first"
        assert rt.live_agents() == 2
        assert ref.passivate()
        assert rt.live_agents() == 0
        assert [n.agent_id for n in ref.tree().walk()] == ["lead", "lead-sub-1"]
        result = ref.run("again", timeout=BOUND)
        assert result.output == "2nd"
        # The same child, with its memory: its second task continues its conversation.
        child = rt.ref("lead-sub-1").context()
        assert [m.content for m in child.messages] == ["a", "h1", "b", "h2"]


def test_an_agent_with_a_run_in_flight_is_not_passivated() -> None:
    started, release = threading.Event(), threading.Event()

    @tool
    def block() -> str:
        """Block until released."""
        started.set()
        release.wait(BOUND)
        return "done"

    agent = Agent("b", model=ScriptedModel([call("block"), "ok"]), tools=[block])
    with MemoryStore() as store, Runtime() as rt:
        ref = rt.spawn(agent, store=store)
        future = ref.run_async("go")
        assert started.wait(BOUND)
        assert not ref.passivate()
        release.set()
        assert future.result(BOUND).output == "ok"
        assert rt.live_agents() == 1


def test_idle_trees_are_passivated_by_themselves_after_idle_after() -> None:
    slept = threading.Event()

    def watch(event: Event) -> None:
        if event.type == "passivated":
            slept.set()

    with MemoryStore() as store, Runtime(idle_after=0.05) as rt:
        ref = rt.spawn(_chat(), store=store)
        ref.subscribe(watch)
        ref.run("hello", timeout=BOUND)
        assert slept.wait(BOUND)
        assert rt.live_agents() == 0
        # Subscribers stay subscribed: the activation is seen too.
        woke = threading.Event()
        ref.subscribe(lambda e: woke.set() if e.type == "activated" else None)
        assert ref.run("again", timeout=BOUND).output == "two"
        assert woke.is_set()


def test_open_session_spawns_restores_or_addresses(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db") as store:
        with Runtime() as rt:
            ref = rt.open_session(_chat(), session_id="user-1", store=store)
            assert ref.agent_id == "user-1"
            assert ref.run("hello", timeout=BOUND).output == "one"
            again = rt.open_session(_chat(), session_id="user-1", store=store)
            assert again == ref
            assert ref.passivate()
            asleep = rt.open_session(_chat(), session_id="user-1", store=store)
            assert asleep.run("again", timeout=BOUND).output == "two"
        with Runtime() as rt:  # a new process, as far as the store can tell
            ref = rt.open_session(_chat(), session_id="user-1", store=store)
            result = ref.run("third", timeout=BOUND)
        assert [m.content for m in result.messages] == [
            "hello",
            "one",
            "again",
            "two",
            "third",
            "three",
        ]


def test_open_session_refuses_bad_arguments() -> None:
    with Runtime() as rt:
        with pytest.raises(UserError, match="session_id"):
            rt.open_session(_chat(), session_id="", store=MemoryStore())
        with pytest.raises(UserError, match="SessionStore"):
            rt.open_session(_chat(), session_id="s", store="s.db")  # type: ignore[arg-type]


def test_a_stopped_sleeping_agent_stays_stopped() -> None:
    with MemoryStore() as store, Runtime() as rt:
        ref = rt.spawn(_chat(), store=store)
        ref.run("hello", timeout=BOUND)
        assert ref.passivate()
        ref.stop()
        with pytest.raises(AgentStoppedError):
            ref.run("again", timeout=BOUND)


@pytest.mark.timeout(120)
def test_a_process_killed_while_its_agents_sleep_loses_nothing(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    first = textwrap.dedent(
        f"""
        import os
        from actors import Agent, Runtime
        from actors.store import SQLiteStore
        from actors.testing import ScriptedModel

        agent = Agent("chat", model=ScriptedModel(["one", "two"], per_agent=True))
        store = SQLiteStore({str(db)!r}, durability="sync")
        rt = Runtime()
        for user in ("u1", "u2"):
            ref = rt.open_session(agent, session_id=user, store=store)
            ref.run("hello " + user, timeout=30)
            assert ref.passivate()
        print("asleep", flush=True)
        os._exit(9)  # no shutdown, no close: as if the machine went down
        """
    )
    done = subprocess.run([sys.executable, "-c", first], capture_output=True, text=True, timeout=60)
    assert done.returncode == 9, done.stderr
    assert done.stdout.strip() == "asleep"
    agent = Agent("chat", model=ScriptedModel(["one", "two"], per_agent=True))
    with SQLiteStore(db) as store, Runtime() as rt:
        results = {
            user: rt.open_session(agent, session_id=user, store=store).run("again", timeout=30)
            for user in ("u1", "u2")
        }
    for user, result in results.items():
        assert [m.content for m in result.messages] == [f"hello {user}", "one", "again", "two"]


def test_a_tree_suspended_below_its_root_sleeps_and_resumes_at_depth() -> None:
    @tool
    def ask_user(ctx: RunContext[Any]) -> Any:
        """Ask the user."""
        if ctx.answer is None:
            return Pending(Request(kind="input", prompt="which city?"))
        return f"city: {ctx.answer.data}"

    child = Agent("helper", model=ScriptedModel([call("ask_user"), "Oslo it is"]), tools=[ask_user])
    lead = Agent(
        "lead",
        model=ScriptedModel([call("helper", task="pick a city"), "done: Oslo"]),
        subagents=[child],
    )
    with MemoryStore() as store, Runtime() as rt:
        ref = rt.spawn(lead, store=store)
        suspended = ref.run("go", timeout=BOUND)
        assert suspended.status == "suspended"
        (request,) = suspended.requests
        assert request.path == ("lead", "lead-sub-1")
        assert ref.passivate()
        assert rt.live_agents() == 0
        assert {n.agent_id: n.status for n in ref.tree().walk()} == {
            "lead": "suspended",
            "lead-sub-1": "suspended",
        }
        result = ref.resume({request.id: Answer(data="Oslo")}, timeout=BOUND)
    assert result.output == "done: Oslo"
    assert result.messages[-2].content == "Oslo it is"
