"""Read-modify-write in one step: the lost update, increment, sequential tools, the warning."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from structlog.testing import capture_logs

from actors import (
    Agent,
    AgentContext,
    Answer,
    ContextUpdate,
    Pending,
    Request,
    RunContext,
    Runtime,
    Tool,
    tool,
)
from actors.testing import FakeClock, ScriptedModel, SyncDriver, call

from .helpers import BOUND, plain, tool_results

CLASH = "parallel tool calls of one step set the same metadata key"


def bump_function(ctx: RunContext[Any], by: int = 1) -> tuple[str, ContextUpdate]:
    """Read the counter from the snapshot and set it one higher.

    Args:
        by: How much to add.
    """
    if by < 0:
        raise ValueError("negative")
    seen = ctx.metadata.get("n", 0)
    return f"saw {seen}", ContextUpdate().set("n", seen + by)


bump = Tool.from_function(bump_function, name="bump")
bump_in_turn = Tool.from_function(bump_function, name="bump", sequential=True)


@tool
def count(ctx: RunContext[Any]) -> ContextUpdate:
    """Count one, commutatively."""
    return ContextUpdate().increment("n")


def three(name: str) -> list[Any]:
    return [[call(name), call(name), call(name)], "done"]


def clashes(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [entry for entry in logs if entry["event"].startswith(CLASH)]


def test_three_parallel_read_modify_writes_lose_two_and_warn_once(rt: Runtime) -> None:
    with capture_logs() as logs:
        result = rt.spawn(Agent("a", model=ScriptedModel(three("bump")), tools=[bump])).run("?")
    assert result.metadata["n"] == 1  # each call read 0: the documented lost update
    [warning] = clashes(logs)
    assert warning["log_level"] == "warning"
    assert warning["keys"] == ["n"]
    assert len(warning["writers"]["n"]) == 3
    assert "increment" in warning["event"]
    assert "sequential=True" in warning["event"]


def test_increment_counts_every_parallel_call(rt: Runtime) -> None:
    with capture_logs() as logs:
        ref = rt.spawn(Agent("a", model=ScriptedModel(three("count")), tools=[count]))
        result = ref.run("?")
    assert result.metadata["n"] == 3
    assert clashes(logs) == []
    ops = [e.data["ops"] for e in ref.context().events if e.type == "context_update"]
    assert ops == [[{"op": "increment", "key": "n", "value": 1}]] * 3  # logged as increments
    # The log replays to the same metadata.
    assert AgentContext.deserialize(ref.context().serialize()).metadata == {"n": 3}


def test_a_sequential_tool_sees_the_updates_of_the_calls_before_it(rt: Runtime) -> None:
    with capture_logs() as logs:
        ref = rt.spawn(
            Agent("a", model=ScriptedModel(three("bump")), tools=[bump_in_turn]),
            metadata={"n": 10},
        )
        result = ref.run("?")
    assert [r.content for r in tool_results(result.messages)] == ["saw 10", "saw 11", "saw 12"]
    assert result.metadata["n"] == 13
    assert clashes(logs) == []  # its calls saw each other's updates: nothing was lost


def test_other_tools_still_run_in_parallel_and_updates_apply_in_call_order(rt: Runtime) -> None:
    @tool
    def note(ctx: RunContext[Any], text: str) -> ContextUpdate:
        """Append a note.

        Args:
            text: The note.
        """
        return ContextUpdate().append("log", text)

    @tool(sequential=True)
    def step(ctx: RunContext[Any], text: str) -> ContextUpdate:
        """Append a step, after the previous one.

        Args:
            text: The step.
        """
        return ContextUpdate().append("log", f"{text}:{len(ctx.metadata.get('log', ()))}")

    model = ScriptedModel(
        [
            [
                call("step", text="s1"),
                call("note", text="n1"),
                call("step", text="s2"),
                call("note", text="n2"),
            ],
            "done",
        ]
    )
    result = rt.spawn(Agent("a", model=model, tools=[note, step])).run("?")
    # s2 saw s1's update (one entry), not the parallel notes; all applied in call order.
    assert result.metadata["log"] == ("s1:0", "n1", "s2:1", "n2")


def test_a_failing_call_does_not_stop_the_ones_after_it(rt: Runtime) -> None:
    model = ScriptedModel([[call("bump"), call("bump", by=-1), call("bump")], "done"])
    result = rt.spawn(Agent("a", model=model, tools=[bump_in_turn])).run("?")
    first, failed, last = tool_results(result.messages)
    assert (first.content, failed.is_error, last.content) == ("saw 0", True, "saw 1")
    assert result.metadata["n"] == 2


def test_the_next_step_starts_from_the_applied_metadata(rt: Runtime) -> None:
    model = ScriptedModel([[call("bump"), call("bump")], [call("bump"), call("bump")], "done"])
    result = rt.spawn(Agent("a", model=model, tools=[bump_in_turn])).run("?")
    assert [r.content for r in tool_results(result.messages)] == [
        "saw 0",
        "saw 1",
        "saw 2",
        "saw 3",
    ]


def test_the_sync_driver_and_the_runtime_write_the_same_log() -> None:
    script = three("bump")
    driver = SyncDriver(
        Agent("a", model=ScriptedModel(script), tools=[bump_in_turn]), clock=FakeClock()
    )
    driven = driver.run("?")
    with Runtime(clock=FakeClock()) as rt:
        ref = rt.spawn(Agent("a", model=ScriptedModel(script), tools=[bump_in_turn]))
        acted = ref.run("?")
        events = ref.context().events
    assert plain(driver.context.events) == plain(events)
    assert driven.metadata == acted.metadata == {"n": 3}


def test_cancelling_a_run_answers_the_calls_still_queued(rt: Runtime) -> None:
    started = threading.Event()

    @tool(sequential=True)
    def wait(ctx: RunContext[Any]) -> str:
        """Wait until cancelled."""
        started.set()
        ctx.cancellation.wait(BOUND)
        return "stopped"

    model = ScriptedModel([[call("wait"), call("wait"), call("wait")], "done"])
    ref = rt.spawn(Agent("a", model=model, tools=[wait]))
    future = ref.run_async("?")
    assert started.wait(BOUND)
    ref.cancel("enough")
    result = future.result(timeout=BOUND)
    assert result.status == "cancelled"
    running, *queued = tool_results(result.messages)
    assert running.content.startswith("Tool call was interrupted before it finished")
    assert [q.content.startswith("Tool call was not executed") for q in queued] == [True, True]


def test_a_suspended_call_lets_the_next_one_run(rt: Runtime) -> None:
    @tool(sequential=True)
    def ask(ctx: RunContext[Any], question: str) -> Any:
        """Ask the host first, then count.

        Args:
            question: What to ask.
        """
        if question == "ask" and ctx.answer is None:
            return Pending(Request(kind="input", prompt="ok?"))
        return ContextUpdate().set("n", ctx.metadata.get("n", 0) + 1)

    model = ScriptedModel([[call("ask", question="ask"), call("ask", question="go")], "done"])
    ref = rt.spawn(Agent("a", model=model, tools=[ask]))
    parked = ref.run("?")
    assert parked.status == "suspended"
    assert parked.metadata["n"] == 1  # the second call ran while the first waits
    [request] = parked.requests
    done = ref.resume({request.id: Answer(ok=True)})
    assert (done.status, done.metadata["n"]) == ("completed", 2)  # resumed on the newer state


def test_approved_calls_of_a_sequential_tool_run_in_turn(rt: Runtime) -> None:
    guarded = Tool.from_function(
        bump_function, name="bump", sequential=True, requires_approval=True
    )
    model = ScriptedModel(three("bump"))
    ref = rt.spawn(Agent("a", model=model, tools=[guarded]), approval_handler=lambda r: True)
    result = ref.run("?", timeout=BOUND)
    assert sorted(r.content for r in tool_results(result.messages)) == ["saw 0", "saw 1", "saw 2"]
    assert result.metadata["n"] == 3


def test_two_keys_clash_in_one_warning_and_the_next_step_warns_again(rt: Runtime) -> None:
    @tool
    def both(ctx: RunContext[Any]) -> ContextUpdate:
        """Set two keys."""
        return ContextUpdate().set("a", 1).set("b", 2)

    model = ScriptedModel([[call("both"), call("both")], [call("both"), call("both")], "done"])
    with capture_logs() as logs:
        rt.spawn(Agent("a", model=model, tools=[both])).run("?")
    assert [w["keys"] for w in clashes(logs)] == [["a", "b"], ["a", "b"]]


@pytest.mark.parametrize("script", [[call("bump"), "done"], [[call("bump"), call("count")], "d"]])
def test_no_warning_without_two_writers_of_one_key(rt: Runtime, script: list[Any]) -> None:
    with capture_logs() as logs:
        rt.spawn(Agent("a", model=ScriptedModel(script), tools=[bump, count])).run("?")
    assert clashes(logs) == []
