"""``ctx.delegate(agent, task)``: a child started from code, with the same bookkeeping."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from structlog.testing import capture_logs

from actors import Agent, RunContext, Runtime, TreeLimits, tool
from actors.exceptions import UserError
from actors.testing import ScriptedModel, call

from .helpers import BOUND, events_of, tool_results, wait_stopped

SEEN: list[RunContext[Any]] = []


@tool
def look(ctx: RunContext) -> str:  # type: ignore[type-arg]
    """Record the context the delegated child's tool gets."""
    SEEN.append(ctx)
    return "looked"


@pytest.fixture(autouse=True)
def _clear() -> None:
    SEEN.clear()


def _worker() -> Agent:
    return Agent("worker", model=ScriptedModel([call("look"), "worker output"]), tools=[look])


def test_delegate_runs_a_child_and_returns_its_output(rt: Runtime) -> None:
    worker = _worker()

    @tool
    def orchestrate(ctx: RunContext, topic: str) -> str:  # type: ignore[type-arg]
        """Hand the topic to a worker agent."""
        return f"worker said: {ctx.delegate(worker, f'research {topic}')}"

    parent = Agent(
        "boss",
        model=ScriptedModel([call("orchestrate", topic="actors"), "done"]),
        tools=[orchestrate],
    )
    deps = {"key": object()}
    ref = rt.spawn(parent, tool_context=deps, metadata={"user": "ada"})
    result = ref.run("?")
    assert tool_results(result.messages)[0].content == "worker said: worker output"
    (ctx,) = SEEN
    assert ctx.agent_id == "boss-sub-1"
    assert ctx.parent_id == "boss"
    assert ctx.tool_context == deps  # a read-only view of the same object
    assert next(iter(ctx.tool_context.values())) is next(iter(deps.values()))
    assert ctx.metadata == {"user": "ada"}
    (spawned,) = events_of(result.events, "subagent_spawned")
    assert (spawned["child_id"], spawned["name"], spawned["task"], spawned["delegated"]) == (
        "boss-sub-1",
        "worker",
        "research actors",
        True,
    )
    (finished,) = events_of(result.events, "subagent_finished")
    assert (finished["child_id"], finished["status"]) == ("boss-sub-1", "completed")
    assert result.tree_usage.requests == result.usage.requests + 2
    wait_stopped(rt, "boss-sub-1")
    assert [n.agent_id for n in ref.tree().walk()] == ["boss", "boss-sub-1"]


def test_delegated_child_failure_raises_in_the_tool(rt: Runtime) -> None:
    broken = Agent("broken", model=ScriptedModel([RuntimeError("model down")]))

    @tool
    def orchestrate(ctx: RunContext) -> str:  # type: ignore[type-arg]
        """Delegate to a failing agent."""
        return str(ctx.delegate(broken, "anything"))

    parent = Agent("boss", model=ScriptedModel([call("orchestrate"), "done"]), tools=[orchestrate])
    with capture_logs():
        result = rt.spawn(parent).run("?")
    error = tool_results(result.messages)[0]
    assert error.is_error
    assert error.content.startswith("RunFailedError")
    assert "model down" in error.content
    (finished,) = events_of(result.events, "subagent_finished")
    assert finished["status"] == "failed"


def test_delegation_obeys_tree_limits() -> None:
    worker = _worker()

    @tool
    def orchestrate(ctx: RunContext) -> str:  # type: ignore[type-arg]
        """Delegate."""
        return str(ctx.delegate(worker, "x"))

    parent = Agent("boss", model=ScriptedModel([call("orchestrate"), "done"]), tools=[orchestrate])
    with Runtime(limits=TreeLimits(max_depth=0)) as rt, capture_logs():
        result = rt.spawn(parent).run("?")
    error = tool_results(result.messages)[0]
    assert error.is_error
    assert "max depth 0 reached" in error.content


def test_delegate_outside_a_runtime_says_so() -> None:
    with pytest.raises(UserError, match="needs a running agent"):
        RunContext().delegate(_worker(), "x")


def test_cancelling_the_parent_cancels_its_delegated_child(rt: Runtime) -> None:
    started, done = threading.Event(), threading.Event()
    observed: list[bool] = []

    @tool
    def wait_for_cancel(ctx: RunContext) -> str:  # type: ignore[type-arg]
        """Cooperative: returns when its run is cancelled."""
        started.set()
        observed.append(ctx.cancellation.wait(5))
        done.set()
        return "stopped"

    worker = Agent(
        "worker", model=ScriptedModel([call("wait_for_cancel"), "x"]), tools=[wait_for_cancel]
    )

    @tool
    def orchestrate(ctx: RunContext) -> str:  # type: ignore[type-arg]
        """Delegate, and wait."""
        return str(ctx.delegate(worker, "long job"))

    parent = Agent("boss", model=ScriptedModel([call("orchestrate"), "never"]), tools=[orchestrate])
    ref = rt.spawn(parent)
    future = ref.run_async("?")
    assert started.wait(BOUND)
    ref.cancel("user left")
    assert future.result(BOUND).status == "cancelled"
    wait_stopped(rt, "boss-sub-1")
    assert done.wait(BOUND)
    assert observed == [True]


def test_a_delegated_child_left_behind_by_a_timed_out_tool_is_cancelled(rt: Runtime) -> None:
    # Without a cancel, this worker would take 30 s; stopping well within BOUND shows it was.
    worker = Agent("worker", model=ScriptedModel(["x"], latency=30))

    @tool(timeout=0.1)
    def orchestrate(ctx: RunContext) -> str:  # type: ignore[type-arg]
        """Delegate; times out while the worker works."""
        return str(ctx.delegate(worker, "long job"))

    parent = Agent(
        "boss", model=ScriptedModel([call("orchestrate"), "gave up"]), tools=[orchestrate]
    )
    result = rt.spawn(parent).run("?")
    assert result.output == "gave up"
    assert tool_results(result.messages)[0].content == "Tool timed out after 0.1 s"
    wait_stopped(rt, "boss-sub-1")
