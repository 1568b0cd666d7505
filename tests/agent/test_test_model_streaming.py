"""Test models stream in pieces when asked, keep a bounded history, and work per request alone."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from actors import (
    Agent,
    ModelRequest,
    RunEnded,
    Runtime,
    StreamDelta,
    TextDelta,
    ToolCallDelta,
    UserMessage,
    tool,
)
from actors.exceptions import UserError
from actors.models import _test_support
from actors.testing import FunctionModel, ScriptedModel, SyncDriver, TestModel, call


@tool
def lookup(city: str) -> str:
    """Look a city up."""
    return f"{city}: sunny"


def _deltas_of_a_run(model: Any, tools: list[Any] | None = None) -> tuple[list[Any], Any]:
    with Runtime() as runtime:
        ref = runtime.spawn(Agent("streamer", model=model, tools=tools or []))
        events = list(ref.run_stream("weather in Oslo?"))
    ended = events[-1]
    assert isinstance(ended, RunEnded)
    assert ended.result is not None, ended.error
    return [e for e in events if isinstance(e, TextDelta | ToolCallDelta)], ended.result


def test_a_scripted_model_streams_text_in_pieces_of_chunk_size() -> None:
    seen, result = _deltas_of_a_run(ScriptedModel(["Sunny in Oslo."], chunk_size=4))
    assert [d.text for d in seen] == ["Sunn", "y in", " Osl", "o."]
    assert all(isinstance(d, TextDelta) for d in seen)
    assert result.output == "Sunny in Oslo."  # the reply itself is whole


def test_a_streamed_tool_call_announces_its_id_and_name_then_its_arguments() -> None:
    model = ScriptedModel([call("lookup", city="Oslo"), "done"], chunk_size=5)
    seen, result = _deltas_of_a_run(model, [lookup])
    calls = [d for d in seen if isinstance(d, ToolCallDelta)]
    assert calls[0].tool_name == "lookup"
    assert calls[0].tool_call_id is not None
    assert all(d.tool_name is None for d in calls[1:])
    assert json.loads("".join(d.text for d in calls)) == {"city": "Oslo"}
    assert result.output == "done"


@pytest.mark.parametrize(
    "model",
    [
        FunctionModel(lambda messages, tools: "a reply of some length", chunk_size=6),
        TestModel(text="a reply of some length", chunk_size=6),
    ],
    ids=["FunctionModel", "TestModel"],
)
def test_function_and_test_models_stream_too(model: Any) -> None:
    seen, result = _deltas_of_a_run(model)
    assert "".join(d.text for d in seen) == result.output == "a reply of some length"
    assert len(seen) == 4


def test_without_chunk_size_or_a_stream_nothing_streams() -> None:
    seen, result = _deltas_of_a_run(ScriptedModel(["whole"]))
    assert seen == []
    assert result.output == "whole"
    # No stream: the streaming model answers in one piece (inline, on the agent's turn).
    assert (
        SyncDriver(Agent("a", model=ScriptedModel(["ok"], chunk_size=1))).run("hi").output == "ok"
    )


def test_a_cancelled_run_stops_the_stream() -> None:
    pieces: list[StreamDelta] = []
    request = ModelRequest(messages=[UserMessage(content="hi")])

    def on_delta(delta: StreamDelta) -> None:
        pieces.append(delta)
        if len(pieces) == 2:
            request.cancellation.cancel("enough")

    model = ScriptedModel(["abcdefgh"], chunk_size=2)
    streaming = ModelRequest(
        messages=request.messages, cancellation=request.cancellation, on_delta=on_delta
    )
    with pytest.raises(Exception, match="enough"):
        asyncio.run(model.request(streaming))
    assert [d.text for d in pieces] == ["ab", "cd"]


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_chunk_size_must_be_a_positive_int(bad: Any) -> None:
    with pytest.raises(UserError, match="chunk_size"):
        ScriptedModel(["x"], chunk_size=bad)


# -- what a test model keeps ---------------------------------------------------------------------


def test_a_test_model_keeps_the_latest_requests_only() -> None:
    model = ScriptedModel(["ok"] * 5, history=2)
    driver = SyncDriver(Agent("a", model=model))
    for n in range(5):
        driver.run(f"run {n}")
    assert [r.messages[-1].content for r in model.requests] == ["run 3", "run 4"]


def test_history_none_keeps_every_request_and_zero_keeps_none() -> None:
    everything, nothing = ScriptedModel(["ok"] * 3, history=None), TestModel(history=0)
    for model in (everything, nothing):
        driver = SyncDriver(Agent("a", model=model))
        for n in range(3):
            driver.run(f"run {n}")
    assert len(everything.requests) == 3
    assert nothing.requests == []
    with pytest.raises(UserError, match="history"):
        FunctionModel(lambda m, t: "x", history=-1)


def test_a_recorded_request_holds_a_view_of_the_transcript_not_a_copy() -> None:
    model = ScriptedModel(["a", "b"])
    driver = SyncDriver(Agent("a", model=model))
    driver.run("one")
    driver.run("two")
    first, second = model.requests
    assert [m.content for m in first.messages] == ["one"]  # later messages never show in it
    assert [m.content for m in second.messages] == ["one", "a", "two"]


def test_per_request_work_does_not_grow_with_the_transcript(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    looked_at: list[int] = []
    original = _test_support._counts

    def counting(messages: Any) -> Any:
        messages = list(messages)
        looked_at.append(len(messages))
        return original(messages)

    monkeypatch.setattr(_test_support, "_counts", counting)
    runs = 300
    model = ScriptedModel([call("lookup", city="x"), "done"] * runs, per_agent=True)
    driver = SyncDriver(Agent("a", model=model, tools=[lookup]))
    for _ in range(runs):
        assert driver.run("go").output == "done"
    assert len(driver.context.messages) == 4 * runs
    # After the first request, a request looks at the messages added since the one before.
    assert max(looked_at[4:]) <= 3


def test_per_agent_scripts_stay_in_place_after_a_replace_shortens_the_transcript() -> None:
    model = ScriptedModel(["first", "second", "third"], per_agent=True)
    driver = SyncDriver(Agent("a", model=model))
    driver.run("one")
    driver.run("two")
    # Shadow the first exchange: one assistant message fewer in what the model is shown.
    driver.context.replace_message_range(0, 1, UserMessage(content="(earlier exchange)"))
    assert driver.run("three").output == "second"  # counted again from what it sees


def test_the_test_model_calls_its_tools_in_every_run_of_a_reused_agent() -> None:
    calls: list[str] = []

    @tool
    def ping(host: str) -> str:
        """Ping a host."""
        calls.append(host)
        return "pong"

    driver = SyncDriver(Agent("a", model=TestModel(), tools=[ping]))
    outputs = [driver.run(f"run {n}").output for n in range(3)]
    assert calls == ["a", "a", "a"]
    assert outputs == ['{"ping": "pong"}'] * 3


def test_the_incremental_count_always_equals_a_count_of_everything_shown() -> None:
    from actors import AgentContext, AssistantMessage, SystemMessage

    ctx = AgentContext("a")
    counter = _test_support.TranscriptTally()
    ctx.add_message(SystemMessage(content="base prompt"))

    def check() -> None:
        for view in (ctx.message_view(), ctx.model_messages()):
            assert counter.count("a", view) == _test_support.tally(list(view))

    for n in range(6):
        ctx.add_message(UserMessage(content=f"question number {n}"))
        ctx.add_message(AssistantMessage(content=f"answer {n}"))
        check()
        if n == 2:
            ctx.put_system_prompt_overlay("an overlay of several words")  # a new head
        if n == 4:
            ctx.replace_message_range(1, 4, UserMessage(content="summary"))
            check()


def test_the_tally_forgets_the_agent_that_asked_least_recently_and_still_counts_right() -> None:
    from actors import AgentContext, AssistantMessage

    counter = _test_support.TranscriptTally(agents=2)
    contexts = {name: AgentContext(name) for name in "abc"}
    for n, name in enumerate("abac"):
        ctx = contexts[name]
        ctx.add_message(UserMessage(content=f"question {n}"))
        ctx.add_message(AssistantMessage(content=f"answer {n}"))
        view = ctx.message_view()
        assert counter.count(name, view) == _test_support.tally(list(view))
    assert list(counter._seen) == ["a", "c"]  # b asked least recently: forgotten
    view = contexts["b"].message_view()
    assert counter.count("b", view) == _test_support.tally(list(view))  # counted whole again


def test_a_tally_that_remembers_no_agent_still_counts() -> None:
    from actors import AgentContext

    counter = _test_support.TranscriptTally(agents=0)
    ctx = AgentContext("a")
    ctx.add_message(UserMessage(content="one two"))
    view = ctx.message_view()
    assert counter.count("a", view) == _test_support.tally(list(view))
    assert counter.count("a", view) == _test_support.tally(list(view))
    assert len(counter._seen) == 0
