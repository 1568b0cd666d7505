"""A sync FunctionModel runs off the shared event loop (issue 12, finding 11).

Its function is user code that may block. Run on the runtime's one effects loop, it held up
every other agent's model calls and timers, and ignored its own agent's ``model_timeout``.
"""

from __future__ import annotations

import threading
import time

import pytest

from actors import Agent, Runtime, ToolCall, tool
from actors.exceptions import RunFailedError
from actors.testing import FunctionModel, ScriptedModel

from .helpers import BOUND, tool_results


def _blocking_model(entered: threading.Event, release: threading.Event) -> FunctionModel:
    def slow(messages: object, tools: object) -> str:
        entered.set()
        release.wait(BOUND)  # a slow model: it blocks its thread until the test releases it
        return "slow answer"

    return FunctionModel(slow)


def test_a_slow_sync_function_model_does_not_delay_another_agents_tool_timeout() -> None:
    entered, release, tool_waits = threading.Event(), threading.Event(), threading.Event()

    @tool(timeout=0.2)
    def stuck() -> str:
        """Never finishes in time."""
        tool_waits.wait(BOUND)
        return "too late"

    slow_agent = Agent("slow", model=_blocking_model(entered, release))
    quick_agent = Agent(
        "quick",
        model=ScriptedModel([ToolCall(id="c1", name="stuck", arguments={}), "gave up"]),
        tools=[stuck],
    )
    try:
        with Runtime() as runtime:
            slow = runtime.spawn(slow_agent).run_async("think hard")
            assert entered.wait(BOUND)
            began = time.monotonic()
            # The tool's timer lives on the same event loop as the slow agent's model call.
            result = runtime.spawn(quick_agent).run("go", timeout=BOUND / 2)
            waited = time.monotonic() - began
            assert not release.is_set()
            assert not slow.done()
            assert tool_results(result.messages)[0].content == "Tool timed out after 0.2 s"
            assert waited < BOUND / 2
            release.set()
            assert slow.result(BOUND).output == "slow answer"
    finally:
        release.set()
        tool_waits.set()


def test_a_model_timeout_cuts_a_sync_function_model_that_blocks() -> None:
    entered, release = threading.Event(), threading.Event()
    agent = Agent("slow", model=_blocking_model(entered, release), model_timeout=0.2)
    try:
        with Runtime() as runtime:
            ref = runtime.spawn(agent)
            with pytest.raises(RunFailedError, match=r"timed out after 0\.2 s"):
                ref.run("think hard", timeout=BOUND / 2)
            assert entered.is_set()
            assert not release.is_set()
    finally:
        release.set()


def test_an_async_function_model_still_runs_on_the_event_loop() -> None:
    async def reply(messages: object, tools: object) -> str:
        return f"loop thread: {threading.current_thread().name}"

    with Runtime() as runtime:
        output = runtime.spawn(Agent("a", model=FunctionModel(reply))).run("hi").output
    assert output == "loop thread: actors-effects"


def test_a_sync_function_model_that_raises_fails_the_step_with_its_error() -> None:
    def broken(messages: object, tools: object) -> str:
        raise ValueError("the function broke")

    with Runtime() as runtime:
        ref = runtime.spawn(Agent("a", model=FunctionModel(broken)))
        with pytest.raises(RunFailedError, match="ValueError: the function broke"):
            ref.run("hi", timeout=BOUND)
