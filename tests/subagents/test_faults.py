"""A child's fault becomes an error tool result in its parent, which goes on."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from structlog.testing import capture_logs

from actors import Agent, Runtime, Subagent, UserMessage, tool
from actors.models._model import ModelResponse
from actors.testing import FunctionModel, ScriptedModel, call

from .helpers import BOUND, events_of, tool_results, wait_stopped


@tool
def spin(n: int = 0) -> str:
    """Loop."""
    return "again"


def _broken_reply(messages: Any, tools: Any) -> Any:
    # Not an assistant message: the child's own loop raises when it reads the reply.
    return ModelResponse(UserMessage(content="garbage"))  # type: ignore[arg-type]


CASES = {
    "raises": (
        Agent("child", model=FunctionModel(_broken_reply)),
        "failed internally",
    ),
    "model fails": (
        Agent("child", model=ScriptedModel([ConnectionError("provider is down")])),
        "ConnectionError: provider is down",
    ),
    "exceeds its limits": (
        Agent(
            "child",
            model=ScriptedModel([call("spin"), call("spin"), call("spin")]),
            tools=[spin],
            max_iterations=2,
        ),
        "MaxIterationsExceeded",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_child_fault_is_an_error_result_naming_child_and_cause(rt: Runtime, case: str) -> None:
    child, cause = CASES[case]
    parent = Agent(
        "parent",
        model=ScriptedModel([call("child", task="work"), "recovered"]),
        subagents=[child],
    )
    with capture_logs():
        result = rt.spawn(parent).run("?")
    assert result.output == "recovered"
    (error,) = tool_results(result.messages)
    assert error.is_error
    assert "Subagent 'child' (parent-sub-1) failed" in error.content
    assert cause in error.content
    (finished,) = events_of(result.events, "subagent_finished")
    assert finished["status"] == "failed"
    assert cause in finished["error"]
    wait_stopped(rt, "parent-sub-1")


def test_child_past_its_timeout_is_cancelled_and_the_parent_goes_on(rt: Runtime) -> None:
    slow = Agent("slow", model=ScriptedModel(["too late"], latency=30))
    parent = Agent(
        "parent",
        model=ScriptedModel([call("slow", task="work"), "went on"]),
        subagents=[Subagent(slow, timeout=0.1)],
    )
    result = rt.spawn(parent).run("?", timeout=BOUND)
    assert result.output == "went on"
    (error,) = tool_results(result.messages)
    assert error.is_error
    assert "'slow' (parent-sub-1)" in error.content
    assert "timed out after 0.1 s" in error.content
    # A timed-out child is cancelled, then stopped.
    wait_stopped(rt, "parent-sub-1")


def test_child_stopped_mid_run_is_an_error_result(rt: Runtime) -> None:
    started, release = threading.Event(), threading.Event()

    @tool
    def block() -> str:
        """Block."""
        started.set()
        release.wait(BOUND)
        return "late"

    child = Agent("child", model=ScriptedModel([call("block"), "x"]), tools=[block])
    parent = Agent(
        "parent",
        model=ScriptedModel([call("child", task="work"), "handled"]),
        subagents=[child],
    )
    ref = rt.spawn(parent)
    future = ref.run_async("?")
    try:
        assert started.wait(BOUND)
        rt.ref("parent-sub-1").stop()
        result = future.result(BOUND)
    finally:
        release.set()
    assert result.output == "handled"
    (error,) = tool_results(result.messages)
    assert "AgentStoppedError" in error.content
    assert "parent-sub-1" in error.content


def test_child_cancelled_mid_run_is_an_error_result(rt: Runtime) -> None:
    started, release = threading.Event(), threading.Event()

    @tool
    def block() -> str:
        """Block."""
        started.set()
        release.wait(BOUND)
        return "late"

    child = Agent("child", model=ScriptedModel([call("block"), "x"]), tools=[block])
    parent = Agent(
        "parent",
        model=ScriptedModel([call("child", task="work"), "handled"]),
        subagents=[child],
    )
    ref = rt.spawn(parent)
    future = ref.run_async("?")
    try:
        assert started.wait(BOUND)
        rt.ref("parent-sub-1").cancel("operator")
        result = future.result(BOUND)
    finally:
        release.set()
    (error,) = tool_results(result.messages)
    assert error.content == "Subagent 'child' (parent-sub-1) was cancelled."
    assert result.output == "handled"
