"""run_stream / arun_stream: typed events of the whole tree as they happen."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from actors import (
    Agent,
    AssistantMessage,
    ModelRequest,
    ModelResponse,
    Pending,
    Request,
    RunContext,
    RunEnded,
    Runtime,
    StreamDelta,
    SubagentFinished,
    SubagentSpawned,
    Suspended,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    Usage,
    tool,
)
from actors.exceptions import UsageLimitExceeded
from actors.testing import ScriptedModel, call

BOUND = 30.0


class Talker:
    """Streams its text in two pieces; its replies come from a script, per agent."""

    name = "talker"

    def __init__(self, replies: list[Any]) -> None:
        self._script = ScriptedModel(replies, per_agent=True)

    async def request(self, request: ModelRequest) -> ModelResponse:
        response = await self._script.request(request)
        text = response.message.content
        if request.on_delta is not None and text:
            half = len(text) // 2
            for piece in (text[:half], text[half:]):
                request.on_delta(StreamDelta("text", piece))
        return response


@tool
def lookup(topic: str) -> str:
    """Look a topic up.

    Args:
        topic: What to look up.
    """
    return f"facts about {topic}"


def _team() -> Agent[Any]:
    researcher = Agent(
        "researcher",
        model=Talker([call("lookup", topic="tides"), "tides are lunar"]),
        tools=[lookup],
    )
    return Agent(
        "lead",
        model=Talker([call("researcher", task="tides"), "summary ready"]),
        subagents=[researcher],
    )


def test_run_stream_yields_the_whole_tree_in_order_and_ends_with_the_result() -> None:
    with Runtime() as rt:
        events = list(rt.spawn(_team()).run_stream("explain tides"))
    ended = events[-1]
    assert isinstance(ended, RunEnded)
    assert ended.result is not None
    assert ended.result.output == "summary ready"
    assert ended.error is None
    text: dict[tuple[str, ...], str] = {}
    for event in events:
        if isinstance(event, TextDelta):
            text[event.path] = text.get(event.path, "") + event.text
    assert text == {("lead", "lead-sub-1"): "tides are lunar", ("lead",): "summary ready"}
    kinds = [(type(e).__name__, e.agent_id) for e in events if not isinstance(e, TextDelta)]
    assert kinds == [
        ("SubagentSpawned", "lead"),
        ("ToolCallStarted", "lead"),  # the subagent call is a tool call of the lead
        ("ToolCallStarted", "lead-sub-1"),
        ("ToolCallFinished", "lead-sub-1"),
        ("SubagentFinished", "lead"),
        ("ToolCallFinished", "lead"),
        ("RunEnded", "lead"),
    ]
    started = [e for e in events if isinstance(e, ToolCallStarted)][1]
    assert (started.tool_name, started.arguments, started.path) == (
        "lookup",
        {"topic": "tides"},
        ("lead", "lead-sub-1"),
    )
    finished = next(e for e in events if isinstance(e, ToolCallFinished))
    assert finished.agent_id == "lead-sub-1"
    assert finished.content == "facts about tides"
    spawned = next(e for e in events if isinstance(e, SubagentSpawned))
    assert (spawned.child_id, spawned.task) == ("lead-sub-1", "tides")
    assert next(e for e in events if isinstance(e, SubagentFinished)).status == "completed"


def test_a_stream_reports_a_suspension_and_the_suspended_result() -> None:
    @tool
    def confirm(ctx: RunContext[Any]) -> Any:
        """Ask first."""
        if ctx.answer is None:
            return Pending(Request(kind="confirm", prompt="go on?"))
        return "yes"

    agent = Agent("c", model=ScriptedModel([call("confirm"), "done"]), tools=[confirm])
    with Runtime() as rt:
        events = list(rt.spawn(agent).run_stream("?"))
    suspended = [e for e in events if isinstance(e, Suspended)]
    assert [e.request.prompt for e in suspended] == ["go on?"]
    ended = events[-1]
    assert isinstance(ended, RunEnded)
    assert ended.result is not None
    assert ended.result.status == "suspended"


def test_a_failed_streamed_run_ends_with_its_error() -> None:
    from actors import UsageLimits

    agent = Agent(
        "l",
        model=ScriptedModel([call("lookup", topic="x"), "never"]),
        tools=[lookup],
        usage_limits=UsageLimits(requests=1),
    )
    with Runtime() as rt:
        events = list(rt.spawn(agent).run_stream("?"))
    ended = events[-1]
    assert isinstance(ended, RunEnded)
    assert ended.result is None
    assert isinstance(ended.error, UsageLimitExceeded)


def test_arun_stream_serves_an_asyncio_caller_without_blocking_its_loop() -> None:
    async def main(rt: Runtime) -> tuple[list[str], int]:
        ticks = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        kinds = [e.kind async for e in rt.spawn(_team()).arun_stream("explain tides")]
        stop.set()
        await task
        return kinds, ticks

    with Runtime() as rt:
        kinds, ticks = asyncio.run(main(rt))
    assert kinds[-1] == "run_ended"
    assert "subagent_spawned" in kinds
    assert ticks > 0


def test_arun_stream_outside_a_coroutine_is_a_clear_error() -> None:
    with Runtime() as rt, pytest.raises(RuntimeError, match="no running event loop"):
        rt.spawn(_team()).arun_stream("?")


def test_only_a_streamed_run_asks_its_model_to_stream() -> None:
    seen: list[bool] = []

    class Recording:
        name = "rec"

        async def request(self, request: ModelRequest) -> ModelResponse:
            seen.append(request.on_delta is not None)
            return ModelResponse(AssistantMessage(content="ok"), Usage(requests=1))

    with Runtime() as rt:
        ref = rt.spawn(Agent("r", model=Recording()))
        ref.run("plain", timeout=BOUND)
        list(ref.run_stream("streamed"))
        ref.run("plain again", timeout=BOUND)
    assert seen == [False, True, False]


def _approver() -> Agent:
    from actors import tool

    @tool(requires_approval=True)
    def wipe(path: str) -> str:
        """Wipe a path.

        Args:
            path: Which.
        """
        return f"wiped {path}"

    return Agent("ops", model=ScriptedModel([call("wipe", path="/tmp"), "all clean"]), tools=[wipe])


def test_resume_async_and_aresume_stream_answer_without_blocking_a_loop() -> None:
    from actors import Answer
    from actors.exceptions import UnknownRequestError

    async def main(rt: Runtime) -> tuple[list[Any], list[Any], Any]:
        ref = rt.spawn(_approver())
        parked = await ref.run_async("clean up")
        (request,) = parked.requests
        events = [e async for e in ref.aresume_stream({request.id: Answer(ok=True)})]
        again = [e async for e in ref.aresume_stream({request.id: Answer(ok=True)})]
        second = rt.spawn(_approver())
        (other,) = (await second.run_async("clean up")).requests
        done = await second.resume_async({other.id: Answer(ok=False, reason="no")})
        return events, again, done

    with Runtime() as rt:
        events, again, done = asyncio.run(main(rt))
    assert isinstance(events[-1], RunEnded)
    assert events[-1].result is not None
    assert events[-1].result.output == "all clean"
    assert any(isinstance(e, ToolCallFinished) and e.content == "wiped /tmp" for e in events)
    assert isinstance(again[-1].error, UnknownRequestError)  # answered already
    assert done.status == "completed"
