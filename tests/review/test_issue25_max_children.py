"""Issue 25, item 4: `TreeLimits.max_children` limits live children, not children over an
agent's life; a burst past it is still refused with an error result."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from actors import (
    Agent,
    Answer,
    Message,
    Pending,
    Request,
    RunContext,
    Runtime,
    ToolResultMessage,
    TreeLimits,
    tool,
)
from actors.exceptions import UserError
from actors.store import MemoryStore
from actors.testing import FunctionModel, ScriptedModel, SyncDriver, call

BOUND = 30.0


def _worker() -> Agent[Any]:
    return Agent("w", model=ScriptedModel(["ok"], per_agent=True))


def _assistant(messages: int) -> Agent[Any]:
    # Delegates once per user message, like a long-lived assistant.
    script: list[Any] = []
    for i in range(messages):
        script += [call("w", task=str(i)), f"answer {i}"]
    return Agent("p", model=ScriptedModel(script), subagents=[_worker()])


def _results(messages: Any) -> list[str]:
    return [m.content for m in messages if isinstance(m, ToolResultMessage)]


def test_an_assistant_that_delegates_once_per_message_keeps_its_subagent() -> None:
    with Runtime(limits=TreeLimits(max_children=2)) as rt:
        ref = rt.spawn(_assistant(5))
        outputs = [ref.run(f"message {i}", timeout=BOUND).output for i in range(5)]
        results = _results(ref.context().messages)
    assert outputs == [f"answer {i}" for i in range(5)]
    assert results == ["ok"] * 5


def test_the_same_in_the_inline_host() -> None:
    driver = SyncDriver(_assistant(4), limits=TreeLimits(max_children=1))
    for i in range(4):
        driver.run(f"message {i}")
    assert _results(driver.context.messages) == ["ok"] * 4


def test_children_that_finished_free_their_place_across_passivation() -> None:
    with MemoryStore() as store, Runtime(limits=TreeLimits(max_children=1)) as rt:
        ref = rt.spawn(_assistant(3), store=store)
        for i in range(3):
            assert ref.run(f"message {i}", timeout=BOUND).output == f"answer {i}"
            assert ref.passivate()
        context = ref.context()
    assert _results(context.messages) == ["ok"] * 3
    spawned = [e.data["child_id"] for e in context.events if e.type == "subagent_spawned"]
    assert spawned == ["p-sub-1", "p-sub-2", "p-sub-3"]  # ids are never reused


def test_a_burst_past_the_limit_is_refused_and_the_next_step_may_spawn_again() -> None:
    parent = Agent(
        "p",
        model=ScriptedModel(
            [[call("w", task=str(i)) for i in range(3)], call("w", task="again"), "done"]
        ),
        subagents=[_worker()],
    )
    with Runtime(limits=TreeLimits(max_children=2)) as rt:
        result = rt.spawn(parent).run("?", timeout=BOUND)
    refusal = (
        "Subagent 'w' was not started: max live children per agent (2) reached: 2 children of "
        "this agent still running; start more once some have finished."
    )
    assert _results(result.messages) == ["ok", "ok", refusal, "ok"]
    assert result.output == "done"


def test_a_delegation_past_the_limit_is_refused_while_a_child_runs() -> None:
    # The child the model called blocks until the tool has tried to delegate beside it.
    tried = threading.Event()
    refused: list[Exception] = []

    def slow(messages: list[Message], tools: Any) -> str:
        assert tried.wait(BOUND)
        return "slow done"

    @tool
    def helper(ctx: RunContext[Any]) -> str:
        """Delegate a little job."""
        try:
            return str(ctx.delegate(_worker(), "job", timeout=BOUND))
        except UserError as exc:
            refused.append(exc)
            return "refused"
        finally:
            tried.set()

    parent = Agent(
        "p",
        model=ScriptedModel([[call("slow", task="x"), call("helper")], call("helper"), "done"]),
        subagents=[Agent("slow", model=FunctionModel(slow))],
        tools=[helper],
    )
    with Runtime(limits=TreeLimits(max_children=1)) as rt:
        result = rt.spawn(parent).run("?", timeout=BOUND)
    assert _results(result.messages) == ["slow done", "refused", "ok"]
    (error,) = refused
    assert "max live children per agent (1) reached" in str(error)


@pytest.mark.parametrize("limit", [1, 3])
def test_the_limit_counts_children_running_together(limit: int) -> None:
    parent = Agent(
        "p",
        model=ScriptedModel([[call("w", task=str(i)) for i in range(4)], "done"]),
        subagents=[_worker()],
    )
    driver = SyncDriver(parent, limits=TreeLimits(max_children=limit))
    result = driver.run("?")
    oks = [r for r in _results(result.messages) if r == "ok"]
    assert len(oks) == limit


def test_a_suspended_child_keeps_its_place_after_its_parent_slept() -> None:
    @tool
    def ask(ctx: RunContext[Any]) -> Any:
        """Ask the host."""
        if ctx.answer is None:
            return Pending(Request(kind="confirm", prompt="child asks"))
        return "answered"

    @tool
    def helper(ctx: RunContext[Any]) -> Any:
        """Ask the host, then delegate a job."""
        if ctx.answer is None:
            return Pending(Request(kind="confirm", prompt="parent asks"))
        try:
            return str(ctx.delegate(_worker(), "job", timeout=BOUND))
        except UserError as exc:
            return f"refused: {exc}"

    asker = Agent("asker", model=ScriptedModel([call("ask"), "asker done"]), tools=[ask])
    parent = Agent(
        "p",
        model=ScriptedModel([[call("asker", task="x"), call("helper")], "done"]),
        subagents=[asker],
        tools=[helper],
    )
    with MemoryStore() as store, Runtime(limits=TreeLimits(max_children=1)) as rt:
        ref = rt.spawn(parent, store=store)
        suspended = ref.run("?", timeout=BOUND)
        assert suspended.status == "suspended"
        assert ref.passivate()
        mine = next(r for r in suspended.requests if r.prompt == "parent asks")
        # The child still waits on its own request: it is live, so the tool may not delegate.
        again = ref.resume({mine.id: Answer(ok=True)}, timeout=BOUND)
        assert again.status == "suspended"
        (theirs,) = again.requests
        result = ref.resume({theirs.id: Answer(ok=True)}, timeout=BOUND)
    assert result.output == "done"
    results = _results(result.messages)
    assert "asker done" in results
    (refused,) = [r for r in results if r.startswith("refused")]
    assert refused.startswith("refused: delegation refused: max live children per agent (1)")
