"""Delegation from async tools, its deadline, its refusals, and delegation in the SyncDriver."""

from __future__ import annotations

from typing import Any

import pytest

from actors import Agent, RunContext, Runtime, TreeLimits, tool
from actors.testing import ScriptedModel, SyncDriver, call

from .helpers import BOUND, events_of, tool_results


def _worker(answer: str = "worker answer", latency: float = 0.0) -> Agent[Any]:
    return Agent("worker", model=ScriptedModel([answer], per_agent=True, latency=latency))


def _lead(the_tool: Any) -> Agent[Any]:
    return Agent("lead", model=ScriptedModel([call(the_tool.name), "done"]), tools=[the_tool])


def test_an_async_tool_awaits_a_delegated_child_without_blocking_the_loop() -> None:
    worker = _worker()

    @tool
    async def ask_worker(ctx: RunContext[Any]) -> str:
        """Ask the worker."""
        return f"worker said: {await ctx.adelegate(worker, 'do it', timeout=BOUND)}"

    with Runtime() as rt:
        result = rt.spawn(_lead(ask_worker)).run("go", timeout=BOUND)
    assert [m.content for m in tool_results(result.messages)] == ["worker said: worker answer"]
    assert events_of(result.events, "subagent_finished")[0]["status"] == "completed"


def test_the_blocking_delegate_in_an_async_tool_says_what_to_use() -> None:
    worker = _worker()

    @tool
    async def wrong(ctx: RunContext[Any]) -> str:
        """Block the loop (refused)."""
        return str(ctx.delegate(worker, "do it"))

    with Runtime() as rt:
        result = rt.spawn(_lead(wrong)).run("go", timeout=BOUND)
    (content,) = [m.content for m in tool_results(result.messages)]
    assert content.startswith("UserError")
    assert "adelegate" in content


def test_a_delegated_child_past_its_deadline_is_cancelled_and_the_tool_told() -> None:
    slow = _worker(latency=30)

    @tool
    def ask_slow(ctx: RunContext[Any]) -> str:
        """Ask a worker that never answers in time."""
        return str(ctx.delegate(slow, "do it", timeout=0.2))

    with Runtime() as rt:
        result = rt.spawn(_lead(ask_slow)).run("go", timeout=BOUND)
        (content,) = [m.content for m in tool_results(result.messages)]
        assert content.startswith("RunTimeoutError")
        node = rt._host.nodes.get("lead-sub-1")
        assert node is None or node.ref.actor_stopped.wait(BOUND)


def test_a_refused_delegation_books_nothing() -> None:
    worker = _worker()

    @tool
    def ask_worker(ctx: RunContext[Any]) -> str:
        """Ask the worker."""
        return str(ctx.delegate(worker, "do it"))

    with Runtime(limits=TreeLimits(max_agents=1)) as rt:
        result = rt.spawn(_lead(ask_worker)).run("go", timeout=BOUND)
    (content,) = [m.content for m in tool_results(result.messages)]
    assert "max agents in one tree (1)" in content
    assert events_of(result.events, "subagent_spawned") == []


def test_the_sync_driver_runs_a_delegated_child_inline() -> None:
    worker = _worker()

    @tool
    def ask_worker(ctx: RunContext[Any]) -> str:
        """Ask the worker."""
        return f"worker said: {ctx.delegate(worker, 'do it')}"

    driver = SyncDriver(_lead(ask_worker))
    result = driver.run("go")
    assert [m.content for m in tool_results(result.messages)] == ["worker said: worker answer"]
    assert list(driver.children) == ["lead-sub-1"]
    assert result.tree_usage.requests == result.usage.requests + 1


@pytest.mark.parametrize("task", ["", "   "])
def test_delegate_refuses_an_empty_task(task: str) -> None:
    worker = _worker()

    @tool
    def ask_worker(ctx: RunContext[Any]) -> str:
        """Ask the worker."""
        return str(ctx.delegate(worker, task))

    with Runtime() as rt:
        result = rt.spawn(_lead(ask_worker)).run("go", timeout=BOUND)
    (content,) = [m.content for m in tool_results(result.messages)]
    assert content.startswith("UserError")
