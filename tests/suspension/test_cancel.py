"""Cancellation: ``ref.cancel`` ends the run at once, for the whole tree; the agent lives on."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from structlog.testing import capture_logs

from actors import Agent, Answer, RunContext, Runtime, tool
from actors.testing import ScriptedModel, call

from .conftest import Deliveries
from .helpers import BOUND, ask, events_of, tool_results, wait_stopped


def test_cancel_ends_the_run_with_status_cancelled_and_the_agent_stays_usable(
    rt: Runtime,
) -> None:
    started, done = threading.Event(), threading.Event()
    observed: list[bool] = []

    @tool
    def work(ctx: RunContext) -> str:  # type: ignore[type-arg]
        """Cooperative long work."""
        started.set()
        observed.append(ctx.cancellation.wait(BOUND))
        done.set()
        return "partial"

    model = ScriptedModel([call("work"), "fresh answer"])
    ref = rt.spawn(Agent("a", model=model, tools=[work]))
    future = ref.run_async("go")
    assert started.wait(BOUND)
    ref.cancel("user pressed stop")
    result = future.result(BOUND)
    assert result.status == "cancelled"
    assert result.output is None
    assert events_of(result.events, "cancelled") == [
        {"run_id": result.run_id, "reason": "user pressed stop"}
    ]
    assert result.events[-1].type == "turn_end"
    assert result.events[-1].data["reason"] == "cancelled"
    # The running call's token was set, and the transcript stays well formed.
    assert done.wait(BOUND)
    assert observed == [True]
    (patched,) = tool_results(result.messages)
    assert patched.is_error
    assert patched.content == (
        "Tool call was interrupted before it finished (it may have had effects): "
        "the run was cancelled (user pressed stop)"
    )
    assert ref.status == "idle"
    assert ref.run("again").output == "fresh answer"


def test_cancelling_an_idle_agent_does_nothing(rt: Runtime) -> None:
    ref = rt.spawn(Agent("a", model=ScriptedModel(["hi", "hi again"])))
    ref.cancel()
    ref.run("?")
    before = ref.context().events
    ref.cancel("nothing to cancel")
    assert ref.context().events == before
    assert ref.run("?").output == "hi again"


def test_a_tool_that_ignores_its_token_does_not_delay_the_cancel(
    rt: Runtime, deliveries: Deliveries
) -> None:
    started, release = threading.Event(), threading.Event()

    @tool
    def stubborn() -> str:
        """Ignores cancellation."""
        started.set()
        release.wait(BOUND)
        return "late result"

    stubborn_call = call("stubborn")
    ref = rt.spawn(Agent("a", model=ScriptedModel([stubborn_call]), tools=[stubborn]))
    future = ref.run_async("go")
    try:
        assert started.wait(BOUND)
        began = time.perf_counter()
        ref.cancel("stop")
        result = future.result(BOUND)
        elapsed = time.perf_counter() - began
    finally:
        release.set()
    assert result.status == "cancelled"
    assert elapsed < 2.0, f"cancel took {elapsed:.3f} s"
    # The late result is discarded (and logged); the transcript does not change.
    with capture_logs() as logs:
        assert deliveries.of(stubborn_call.id).wait(BOUND)
        after = ref.context()  # answered after the late result was handled (FIFO mailbox)
    assert after.messages == list(result.messages)
    discarded = [e for e in logs if e["event"] == "late tool result discarded"]
    assert [e["tool_call_id"] for e in discarded] == [stubborn_call.id]


def test_a_model_call_in_flight_is_abandoned(rt: Runtime) -> None:
    ref = rt.spawn(Agent("a", model=ScriptedModel(["never", "second"], latency=30)))
    future = ref.run_async("go")
    ref.cancel("too slow")
    result = future.result(BOUND)  # not the 30 s of the model
    assert result.status == "cancelled"
    assert [m.role for m in result.messages] == ["user"]


def test_cancelling_a_suspended_run_closes_its_requests_and_its_children(rt: Runtime) -> None:
    asker = Agent("asker", model=ScriptedModel([call("ask", question="q")]), tools=[ask])
    root = Agent(
        "root",
        model=ScriptedModel([[call("asker", task="t"), call("ask", question="own")], "later"]),
        tools=[ask],
        subagents=[asker],
    )
    ref = rt.spawn(root)
    requests = ref.run("?").requests
    assert len(requests) == 2
    ref.cancel("abandoned")
    wait_stopped(rt, "root-sub-1")
    context = ref.context()
    assert context.suspended == {}
    assert events_of(context.events, "cancelled")[0]["reason"] == "abandoned"
    assert ref.status == "idle"
    # The old requests are gone for good.
    from actors.exceptions import UnknownRequestError

    try:
        ref.resume({requests[0].id: Answer()})
    except UnknownRequestError:
        pass
    else:
        raise AssertionError("an answer to a cancelled run's request was accepted")


def test_cancel_of_a_three_level_tree_of_100_agents_stops_every_descendant() -> None:
    arrived = threading.Event()
    count = [0]
    lock = threading.Lock()
    leaves = 90

    @tool
    async def hold(ctx: RunContext) -> str:  # type: ignore[type-arg]
        """Wait (cooperatively) until the run is cancelled."""
        loop = asyncio.get_running_loop()
        cancelled = loop.create_future()

        def wake(_reason: str) -> None:
            loop.call_soon_threadsafe(lambda: cancelled.done() or cancelled.set_result(None))

        ctx.cancellation.on_cancel(wake)
        with lock:
            count[0] += 1
            if count[0] == leaves:
                arrived.set()
        await asyncio.wait_for(cancelled, BOUND)
        return "cancelled"

    leaf = Agent("leaf", model=ScriptedModel([call("hold"), "x"], per_agent=True), tools=[hold])
    mid = Agent(
        "mid",
        model=ScriptedModel([[call("leaf", task=f"l{i}") for i in range(10)], "x"], per_agent=True),
        subagents=[leaf],
    )
    root = Agent(
        "root",
        model=ScriptedModel([[call("mid", task=f"m{i}") for i in range(9)], "x"]),
        subagents=[mid],
    )
    # Logs are captured, not rendered: rendering tracebacks would dominate the figure.
    with Runtime() as rt, capture_logs() as logs:
        ref = rt.spawn(root)
        future = ref.run_async("fan out")
        assert arrived.wait(BOUND * 2)
        nodes = [n for n in rt._host.nodes.values() if n.agent_id != "root"]
        assert len(nodes) + 1 == 100
        assert rt.live_agents() == 100
        began = time.perf_counter()
        ref.cancel("stop everything")
        result = future.result(BOUND)
        for node in nodes:
            assert node.ref is not None
            assert node.ref.actor_stopped.wait(BOUND), node.agent_id
        elapsed = time.perf_counter() - began
        assert rt.live_agents() == 1
    assert result.status == "cancelled"
    failed = sum(1 for entry in logs if entry["event"] == "effect failed")
    print(
        f"\ncancel of a 3-level tree of 100 agents: every descendant stopped in {elapsed:.3f} s"
        f" ({failed} 'effect failed' errors logged)"
    )
    assert elapsed < 5.0, f"{elapsed:.3f} s"


def test_run_timeout_cancels_the_tree_and_raises_with_the_partial_transcript(rt: Runtime) -> None:
    from actors.exceptions import RunTimeoutError

    slow = Agent("slow", model=ScriptedModel(["never"], latency=30))
    parent = Agent(
        "p",
        model=ScriptedModel([call("slow", task="t"), "after timeout"]),
        subagents=[slow],
    )
    ref = rt.spawn(parent)
    began = time.perf_counter()
    try:
        ref.run("go", timeout=0.2)
    except RunTimeoutError as error:
        caught: Any = error
    else:
        raise AssertionError("no RunTimeoutError")
    assert time.perf_counter() - began < BOUND
    assert "0.2" in str(caught)
    assert caught.agent_id == "p"
    assert [m.role for m in caught.messages] == ["user", "assistant", "tool"]
    assert caught.usage is not None
    assert caught.usage.requests == 1
    wait_stopped(rt, "p-sub-1")
    assert ref.status == "idle"
    assert ref.run("again").output == "after timeout"
