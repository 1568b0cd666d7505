"""Effects off the actor's thread: concurrent and async tools, timeouts, completion order."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from actors import (
    Agent,
    AssistantMessage,
    ContextUpdate,
    ModelRequest,
    ModelResponse,
    RunContext,
    Runtime,
    tool,
)
from actors.testing import FakeClock, ScriptedModel, call

from .conftest import Deliveries
from .helpers import BOUND, plain, tool_results


def test_async_tools_run_on_the_effects_loop(rt: Runtime) -> None:
    @tool
    async def fetch(ctx: RunContext, url: str) -> str:  # type: ignore[type-arg]
        """Fetch."""
        await asyncio.sleep(0)
        return f"{ctx.agent_id} got {url}"

    model = ScriptedModel([call("fetch", url="http://x"), "done"])
    result = rt.spawn(Agent("a", model=model, tools=[fetch])).run("?")
    assert tool_results(result.messages)[0].content == "a got http://x"


def test_tools_of_one_reply_run_concurrently(rt: Runtime) -> None:
    started = {"left": threading.Event(), "right": threading.Event()}

    @tool
    def meet(side: str) -> bool:
        """Wait for the other side: only possible if both run at once."""
        started[side].set()
        other = "right" if side == "left" else "left"
        return started[other].wait(BOUND)

    model = ScriptedModel([[call("meet", side="left"), call("meet", side="right")], "done"])
    result = rt.spawn(Agent("a", model=model, tools=[meet])).run("?")
    assert [r.content for r in tool_results(result.messages)] == ["true", "true"]


def test_async_tools_of_one_reply_run_concurrently(rt: Runtime) -> None:
    arrived: list[str] = []
    both = threading.Event()

    @tool
    async def meet(side: str) -> bool:
        """Both coroutines must be in flight at once."""
        arrived.append(side)
        if len(arrived) == 2:
            both.set()
        return await asyncio.to_thread(both.wait, BOUND)

    model = ScriptedModel([[call("meet", side="l"), call("meet", side="r")], "done"])
    result = rt.spawn(Agent("a", model=model, tools=[meet])).run("?")
    assert [r.content for r in tool_results(result.messages)] == ["true", "true"]


def test_a_sync_tool_past_its_timeout_is_an_error_and_its_token_is_set(rt: Runtime) -> None:
    observed = threading.Event()
    reasons: list[str | None] = []

    @tool(timeout=0.05)
    def slow(ctx: RunContext) -> str:  # type: ignore[type-arg]
        """Cooperative: stops when its token is set."""
        ctx.cancellation.wait(BOUND)
        reasons.append(ctx.cancellation.reason)
        observed.set()
        return "late"

    model = ScriptedModel([call("slow"), "gave up"])
    result = rt.spawn(Agent("a", model=model, tools=[slow])).run("?")
    error = tool_results(result.messages)[0]
    assert (error.content, error.is_error) == ("Tool timed out after 0.05 s", True)
    assert observed.wait(BOUND)
    assert reasons == ["timed out after 0.05 s"]
    assert result.output == "gave up"


def test_an_async_tool_past_the_agent_timeout_is_cancelled(rt: Runtime) -> None:
    contexts: list[RunContext[Any]] = []
    cleanup: list[str] = []

    @tool
    async def hang(ctx: RunContext) -> str:  # type: ignore[type-arg]
        """Never finishes by itself."""
        contexts.append(ctx)
        try:
            await asyncio.Event().wait()
        finally:
            cleanup.append("ran")
        return "unreachable"

    model = ScriptedModel([call("hang"), "ok"])
    result = rt.spawn(Agent("a", model=model, tools=[hang], tool_timeout=0.05)).run("?")
    assert tool_results(result.messages)[0].content == "Tool timed out after 0.05 s"
    # The coroutine was cancelled (its finally ran) and its token set, before the result
    # reached the agent.
    assert cleanup == ["ran"]
    assert contexts[0].cancelled
    assert contexts[0].cancellation.reason == "timed out after 0.05 s"


def test_the_actor_answers_while_a_tool_is_blocked(rt: Runtime) -> None:
    started, release = threading.Event(), threading.Event()

    @tool
    def block() -> str:
        """Block until released."""
        started.set()
        release.wait(BOUND)
        return "released"

    ref = rt.spawn(Agent("a", model=ScriptedModel([call("block"), "done"]), tools=[block]))
    future = ref.run_async("?")
    try:
        assert started.wait(BOUND)
        snapshot = ref.context(timeout=BOUND)
        assert snapshot.events[-1].type == "tool_call"
        assert ref.status == "running"
        node = ref.tree()
        assert (node.status, node.step, node.tool) == ("running", 1, "block")
        assert not future.done()
    finally:
        release.set()
    assert future.result(BOUND).output == "done"
    assert ref.tree().tool is None


def _reverse_order_log(order: str, replies: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    """Run two tools that finish in ``order`` ("ab" or "ba"); return the log."""

    with Runtime(clock=FakeClock()) as runtime:
        deliveries = Deliveries(runtime)
        first, second = (replies[0][0].id, replies[0][1].id)
        if order == "ba":
            first, second = second, first

        @tool
        def step(ctx: RunContext, name: str) -> tuple[str, ContextUpdate]:  # type: ignore[type-arg]
            """Append its name to the metadata."""
            if ctx.tool_call_id == second:
                # Finish only once the other call's result is in the agent's mailbox.
                assert deliveries.of(first).wait(BOUND)
            return name, ContextUpdate().append("order", name).set(f"last_{name}", name)

        ref = runtime.spawn(Agent("a", model=ScriptedModel(replies), tools=[step]))
        result = ref.run("?")
        assert result.metadata["order"] == ("a", "b")
        return plain(ref.context().events)


def test_tools_finishing_in_reverse_order_give_the_same_log() -> None:
    replies: list[Any] = [[call("step", name="a"), call("step", name="b")], "done"]
    in_order = _reverse_order_log("ab", replies)
    reversed_ = _reverse_order_log("ba", replies)
    assert in_order == reversed_
    results = [data["content"] for kind, data in in_order if kind == "tool_result"]
    assert results == ["a", "b"]


def test_a_model_request_in_flight_is_one_task_on_the_effects_loop(rt: Runtime) -> None:
    # Every model request of a runtime starts on this loop: no wrapper task around it.
    effects = rt._host.effects
    entered = threading.Event()
    release = asyncio.Event()
    seen: list[int] = []

    class Waiting:
        name = "waiting"

        async def request(self, request: ModelRequest) -> ModelResponse:
            entered.set()
            await release.wait()
            return ModelResponse(message=AssistantMessage(content="done"))

    async def count_and_release() -> None:
        seen.append(len(asyncio.all_tasks() - {asyncio.current_task()}))
        release.set()

    ref = rt.spawn(Agent("a", model=Waiting()))
    future = ref.run_async("?")
    assert entered.wait(BOUND)
    effects.submit(count_and_release()).result(BOUND)
    assert future.result(BOUND).output == "done"
    assert seen == [1]
