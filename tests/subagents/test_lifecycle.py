"""Kept children take follow-up tasks in the same context; stopping a parent stops its tree."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from actors import Agent, Message, Runtime, Subagent, ToolResultMessage, tool
from actors.exceptions import AgentStoppedError
from actors.testing import FunctionModel, ScriptedModel, call

from .helpers import BOUND, events_of, tool_results, wait_stopped


def test_kept_child_continues_the_same_context_across_calls_and_runs(rt: Runtime) -> None:
    child_model = ScriptedModel(["noted 42", "it was 42", "still 42"])
    helper = Subagent(Agent("helper", model=child_model), keep=True)
    other = Agent("other", model=ScriptedModel(["other done"]))
    parent = Agent(
        "p",
        model=ScriptedModel(
            [
                call("helper", task="remember 42"),
                call("helper", task="what was it?"),
                call("other", task="x"),
                "first run done",
                call("helper", task="and now?"),
                "second run done",
            ]
        ),
        subagents=[helper, other],
    )
    ref = rt.spawn(parent)
    first = ref.run("?")
    spawned = events_of(first.events, "subagent_spawned")
    assert [(s["child_id"], s.get("continued", False)) for s in spawned] == [
        ("p-sub-1", False),
        ("p-sub-1", True),
        ("p-sub-2", False),  # a continued child does not take a new number
    ]
    assert [r.content for r in tool_results(first.messages)] == [
        "noted 42",
        "it was 42",
        "other done",
    ]
    # The second task saw the first exchange: one context, continued.
    assert [m.content for m in child_model.requests[1].messages] == [
        "remember 42",
        "noted 42",
        "what was it?",
    ]
    wait_stopped(rt, "p-sub-2")
    assert rt._host.nodes["p-sub-1"].alive
    assert rt.live_agents() == 2
    assert rt.ref("p-sub-1").status == "idle"

    second = ref.run("again")
    assert second.output == "second run done"
    assert len(child_model.requests[2].messages) == 5
    child_model.assert_complete()


def test_stopping_a_parent_stops_its_kept_children(rt: Runtime) -> None:
    helper = Subagent(Agent("helper", model=ScriptedModel(["ok"])), keep=True)
    ref = rt.spawn(
        Agent("p", model=ScriptedModel([call("helper", task="t"), "done"]), subagents=[helper])
    )
    ref.run("?")
    assert rt.live_agents() == 2
    ref.stop()
    assert rt.live_agents() == 0
    assert {n.agent_id: n.status for n in ref.tree().walk()} == {
        "p": "stopped",
        "p-sub-1": "stopped",
    }


def test_stopping_a_parent_mid_run_stops_its_running_children(rt: Runtime) -> None:
    started, release = threading.Event(), threading.Event()

    @tool
    def block() -> str:
        """Block."""
        started.set()
        release.wait(BOUND)
        return "late"

    async def parent_reply(messages: list[Message], tools: Any) -> Any:
        if not any(isinstance(m, ToolResultMessage) for m in messages):
            return call("c", task="t")
        # The parent's next step is still in flight when it stops (cancelled with it).
        await asyncio.Event().wait()
        return "unreachable"

    child = Agent("c", model=ScriptedModel([call("block"), "x"]), tools=[block])
    ref = rt.spawn(Agent("p", model=FunctionModel(parent_reply), subagents=[child]))
    future = ref.run_async("?")
    try:
        assert started.wait(BOUND)
        ref.stop()
        with pytest.raises(AgentStoppedError):
            future.result(BOUND)
        assert rt.live_agents() == 0
    finally:
        release.set()


def test_a_kept_child_s_old_timeout_does_not_cancel_its_next_task(rt: Runtime) -> None:
    timers: list[Any] = []

    def record(delay: float, callback: Any) -> Any:
        timers.append(callback)  # fired by hand below, never by the clock
        return lambda: None

    rt._host.effects.call_later = record  # type: ignore[method-assign]
    started, release = threading.Event(), threading.Event()

    @tool
    def block() -> str:
        """Block (second task only)."""
        started.set()
        release.wait(BOUND)
        return "second"

    helper = Subagent(
        Agent(
            "helper", model=ScriptedModel(["first", call("block"), "second done"]), tools=[block]
        ),
        keep=True,
        timeout=60,
    )
    parent = Agent(
        "p",
        model=ScriptedModel([call("helper", task="one"), call("helper", task="two"), "done"]),
        subagents=[helper],
    )
    ref = rt.spawn(parent)
    future = ref.run_async("?")
    try:
        assert started.wait(BOUND)  # the second task is running
        first_task_timer = timers[0]
        first_task_timer()  # the first task's deadline passes during the second task
    finally:
        release.set()
    result = future.result(BOUND)
    assert [r.content for r in tool_results(result.messages)] == ["first", "second done"]
