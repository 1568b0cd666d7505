"""Steering: ``ref.send`` mid-run is delivered at the next step boundary."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from actors import (
    Agent,
    AssistantMessage,
    Message,
    Runtime,
    ToolResultMessage,
    UserMessage,
    tool,
)
from actors.testing import FunctionModel, ScriptedModel, call

from .helpers import BOUND


def _roles(messages: list[Message]) -> list[tuple[str, str]]:
    out = []
    for m in messages:
        if isinstance(m, AssistantMessage) and m.tool_calls:
            out.append(("assistant", "+".join(c.name for c in m.tool_calls)))
        elif isinstance(m, ToolResultMessage):
            out.append(("tool", m.content))
        else:
            out.append((m.role, str(m.content)))
    return out


def test_send_mid_run_is_delivered_after_the_step_never_between_call_and_result(
    rt: Runtime,
) -> None:
    started, release = threading.Event(), threading.Event()

    @tool
    def slow() -> str:
        """Blocks until released."""
        started.set()
        release.wait(BOUND)
        return "slow done"

    @tool
    def quick() -> str:
        """Returns at once."""
        return "quick done"

    model = ScriptedModel([[call("quick"), call("slow")], "answer"])
    ref = rt.spawn(Agent("a", model=model, tools=[quick, slow]))
    future = ref.run_async("start")
    try:
        assert started.wait(BOUND)
        ref.send("also consider X")
        ref.send(UserMessage(content="and Y"))
    finally:
        release.set()
    result = future.result(BOUND)
    assert _roles(list(model.requests[1].messages)) == [
        ("user", "start"),
        ("assistant", "quick+slow"),
        ("tool", "quick done"),
        ("tool", "slow done"),
        ("user", "also consider X"),
        ("user", "and Y"),
    ]
    steered = [e for e in result.events if e.type == "user_message" and e.data.get("source")]
    assert [e.data["source"] for e in steered] == ["steer", "steer"]
    # Delivered at the step boundary: after the step's results, before the next request.
    kinds = [e.type for e in result.events]
    steer_at = [e.seq - result.events[0].seq for e in steered]
    last_result = max(i for i, k in enumerate(kinds) if k == "tool_result")
    next_step = max(i for i, k in enumerate(kinds) if k == "step_start")
    assert all(last_result < i < next_step for i in steer_at)


def test_send_while_the_model_is_thinking_reaches_the_next_request(rt: Runtime) -> None:
    asked, release = threading.Event(), threading.Event()

    async def reply(messages: list[Message], tools: Any) -> Any:
        if len([m for m in messages if isinstance(m, AssistantMessage)]) == 0:
            asked.set()
            await asyncio.to_thread(release.wait, BOUND)
            return call("quick")
        return " | ".join(str(m.content) for m in messages if isinstance(m, UserMessage))

    @tool
    def quick() -> str:
        """Quick."""
        return "ok"

    ref = rt.spawn(Agent("a", model=FunctionModel(reply), tools=[quick]))
    future = ref.run_async("first")
    assert asked.wait(BOUND)
    ref.send("steer")
    release.set()
    assert future.result(BOUND).output == "first | steer"


def test_send_to_an_idle_agent_starts_nothing_and_the_next_run_sees_it(rt: Runtime) -> None:
    model = ScriptedModel(["reply"])
    ref = rt.spawn(Agent("a", model=model))
    ref.send("background: the user is Ada")
    context = ref.context()  # the ask is answered after the send is handled
    assert ref.status == "idle"
    assert [e.type for e in context.events] == ["user_message"]
    assert model.requests == []
    ref.run("hello")
    assert [m.content for m in model.requests[0].messages] == [
        "background: the user is Ada",
        "hello",
    ]


def test_send_during_the_final_answer_is_not_lost(rt: Runtime) -> None:
    asked, release = threading.Event(), threading.Event()

    async def reply(messages: list[Message], tools: Any) -> str:
        if sum(isinstance(m, AssistantMessage) for m in messages) == 0:
            asked.set()
            await asyncio.to_thread(release.wait, BOUND)
            return "final answer"
        return "second run answer"

    model = FunctionModel(reply)
    ref = rt.spawn(Agent("a", model=model))
    future = ref.run_async("first")
    assert asked.wait(BOUND)
    ref.send("too late for this answer")
    release.set()
    result = future.result(BOUND)
    assert result.output == "final answer"
    # It joins the transcript like a message sent to an idle agent: the next run sees it.
    ref.run("next")
    assert [(m.role, m.content) for m in model.requests[-1].messages] == [
        ("user", "first"),
        ("assistant", "final answer"),
        ("user", "too late for this answer"),
        ("user", "next"),
    ]
