"""Compaction: the agent summarises its oldest messages before a request would not fit."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from actors import (
    Agent,
    AgentContext,
    Compaction,
    ContextUpdate,
    Runtime,
    SystemMessage,
    UserMessage,
    tool,
)
from actors.exceptions import AgentDefinitionError, ContextWindowExceeded
from actors.loop._compaction import SUMMARY_PREFIX, render_transcript
from actors.loop._history import _problem
from actors.sim import Simulation
from actors.testing import FunctionModel, SyncDriver

from .compaction_helpers import Counting, tool_turns

WINDOW = 300


def compacting(model: Any, **options: Any) -> Agent[str]:
    window = options.pop("context_window", WINDOW)
    tools = options.pop("tools", ())
    return Agent(
        "assistant",
        model=model,
        system_prompt="You are terse.",
        tools=tools,
        context_window=window,
        compaction=Compaction(**{"at": 0.8, "keep_last_turns": 2, **options}),
    )


def prompt(n: int) -> str:
    return f"turn {n}: " + "x" * 60


def compacted(ctx: AgentContext) -> list[Any]:
    return [e for e in ctx.events if e.type == "compacted"]


def test_no_request_passes_the_limit_and_the_log_keeps_every_message() -> None:
    model = Counting()
    with SyncDriver(compacting(model)) as driver:
        for n in range(40):
            assert driver.run(prompt(n)).output == "ok"
        ctx = driver.context
    assert compacted(ctx), "40 turns of ~25 tokens do not fit 300 tokens"
    assert max(tokens for tokens, _ in model.sent) <= int(WINDOW * 0.8)
    # Non-destructive: every prompt is still in the log, and the projection starts with the
    # system message, then the latest summary, then the kept turns.
    logged = [e.data["content"] for e in ctx.events if e.type == "user_message"]
    assert logged == [prompt(n) for n in range(40)]
    messages = ctx.messages
    assert isinstance(messages[0], SystemMessage)
    assert messages[1].content.startswith(SUMMARY_PREFIX)
    assert messages[-2].content == prompt(39)
    # A restore folds the log to the same transcript.
    assert AgentContext.from_events(ctx.events, agent_id=ctx.agent_id).messages == messages


def test_the_summarizer_gets_exactly_the_messages_each_compaction_shadows() -> None:
    model = Counting()
    with SyncDriver(compacting(model)) as driver:
        for n in range(30):
            driver.run(prompt(n))
        ctx = driver.context
    events = compacted(ctx)
    assert len(events) == len(model.summaries) >= 2
    for event, summary_request in zip(events, model.summaries, strict=True):
        # The transcript just before the event, rebuilt from the log.
        before = AgentContext.from_events(ctx.events[: event.seq]).messages
        first, last, kept = event.data["first"], event.data["last"], event.data["kept"]
        shadowed = [before[n] for n in range(first, last + 1) if n not in kept]
        assert summary_request.messages[1].content.endswith(render_transcript(shadowed))
        assert event.data["covers"] == [
            AgentContext.from_events(ctx.events[: event.seq]).entries[first].seq,
            AgentContext.from_events(ctx.events[: event.seq]).entries[last].seq,
        ]
    # A later summary covers the earlier one: nothing summarised is lost from view.
    assert model.summaries[1].messages[1].content.count(SUMMARY_PREFIX.strip()) == 1


def test_the_system_message_pinned_messages_and_the_last_turns_stay() -> None:
    @tool
    def note() -> ContextUpdate:
        """Pin this call, by id, through the metadata."""
        return ContextUpdate().append("pinned", "c3")

    agent = Agent(
        "assistant",
        model=Counting(reply=tool_turns),
        system_prompt="You are terse.",
        tools=[note],
        context_window=600,
        compaction=Compaction(at=0.8, keep_last_turns=2),
    )
    with SyncDriver(agent) as driver:
        driver.run(prompt(0))
        driver.context.add_message(UserMessage(content="remember: the code is 42"), pin=True)
        for n in range(1, 30):
            driver.run(prompt(n))
        ctx = driver.context
    assert compacted(ctx)
    contents = [m.content for m in ctx.messages]
    assert contents[0] == "You are terse."
    assert "remember: the code is 42" in contents
    ids = [m.tool_call_id for m in ctx.messages if m.role == "tool"]
    assert "c3" in ids  # pinned through the metadata key, with its call
    assert any(
        m.role == "assistant" and any(c.id == "c3" for c in m.tool_calls) for m in ctx.messages
    )
    assert contents[-8] == prompt(28)  # the last two turns: prompt, call, result, answer
    assert ctx.pinned_seqs
    assert AgentContext.from_events(ctx.events).pinned_seqs == ctx.pinned_seqs


def test_a_tool_call_and_its_result_are_never_parted() -> None:
    model = Counting(reply=tool_turns)

    @tool
    def note() -> str:
        """Note something."""
        return "noted " + "y" * 40

    with SyncDriver(compacting(model, tools=[note], context_window=500)) as driver:
        for n in range(30):
            driver.run(prompt(n))
        ctx = driver.context
    assert compacted(ctx)
    for _, request in model.sent:
        assert _problem(list(request.messages)) is None
    assert _problem(ctx.messages) is None


def test_a_failing_summarizer_falls_back_to_a_trim_that_fits_and_logged() -> None:
    def broken(request: Any) -> str:
        raise RuntimeError("summarizer down")

    model = Counting(summarize=broken)
    with SyncDriver(compacting(model)) as driver:
        for n in range(20):
            assert driver.run(prompt(n)).output == "ok"
        ctx = driver.context
    events = compacted(ctx)
    assert events
    assert all(e.data["fallback"] == "trim" for e in events)
    assert "summarizer down" in events[0].data["reason"]
    assert "could not be summarised" in ctx.messages[1].content
    assert max(tokens for tokens, _ in model.sent) <= int(WINDOW * 0.8)


def test_a_request_that_cannot_fit_fails_typed_and_is_never_sent() -> None:
    model = Counting()
    with SyncDriver(compacting(model)) as driver:
        result = driver.run("short")
        assert result.output == "ok"
        with pytest.raises(ContextWindowExceeded, match="context window is 300"):
            driver.run("z" * 2_000)
    assert all(tokens <= WINDOW for tokens, _ in model.sent)


def test_a_provider_refusing_the_length_compacts_and_retries_once() -> None:
    # The provider's window is smaller than the agent was told: it refuses, the agent compacts.
    model = Counting(window=150)
    with SyncDriver(compacting(model)) as driver:
        for n in range(12):
            assert driver.run(prompt(n)).output == "ok"
        ctx = driver.context
    refused = [e for e in ctx.events if e.type == "step_end" and e.data.get("error")]
    assert refused
    assert all(e.data["error"] == "ContextTooLongError" for e in refused)
    assert compacted(ctx)
    # Each refusal was followed by a compaction and an accepted retry.
    assert len([t for t, _ in model.sent if t > 150]) == len(refused)


def test_a_named_or_agent_summarizer_is_asked_instead_of_the_agents_model() -> None:
    main = Counting("main")
    summarizer = FunctionModel(lambda messages, tools: "brief", name="summarizer")
    with SyncDriver(compacting(main, summarizer=summarizer)) as driver:
        for n in range(20):
            driver.run(prompt(n))
        ctx = driver.context
    assert not main.summaries
    assert summarizer.requests
    assert compacted(ctx)[0].data["summarizer"] == "summarizer"
    writer = Agent("writer", model=summarizer, system_prompt="Summarise as a haiku.")
    with SyncDriver(compacting(Counting(), summarizer=writer)) as driver:
        for n in range(20):
            driver.run(prompt(n))
    assert summarizer.requests[-1].messages[0].content == "Summarise as a haiku."


def test_the_mailbox_stays_open_while_a_summary_is_written() -> None:
    started, release = threading.Event(), threading.Event()

    def slow(request: Any) -> str:
        started.set()
        assert release.wait(10)
        return "summary"

    class Threaded(Counting):
        def respond_inline(self, request: Any) -> Any:
            return None  # asked on the effects loop: the agent's mailbox is free

        async def request(self, request: Any) -> Any:
            import asyncio

            return await asyncio.to_thread(self.answer, request)

    model = Threaded(summarize=slow)
    with Runtime() as runtime:
        ref = runtime.spawn(compacting(model))
        for n in range(9):
            ref.run(prompt(n), timeout=10)
        future = ref.run_async(prompt(9))
        assert started.wait(10)
        assert ref.status == "running"
        ref.send("steer: also mention the weather")  # taken while the summary is written
        ref.context()  # a query answered meanwhile
        release.set()
        assert future.result(10).output == "ok"
        ctx = ref.context()
    assert compacted(ctx)
    assert ctx.messages[-2].content == "steer: also mention the weather"


def test_a_cancel_during_compaction_ends_the_run_and_logs_no_compaction() -> None:
    started, release = threading.Event(), threading.Event()

    def slow(request: Any) -> str:
        started.set()
        release.wait(10)
        return "summary"

    class Threaded(Counting):
        def respond_inline(self, request: Any) -> Any:
            return None

        async def request(self, request: Any) -> Any:
            import asyncio

            return await asyncio.to_thread(self.answer, request)

    model = Threaded(summarize=slow)
    with Runtime() as runtime:
        ref = runtime.spawn(compacting(model))
        for n in range(9):
            ref.run(prompt(n), timeout=10)
        future = ref.run_async(prompt(9))
        assert started.wait(10)
        ref.cancel("user left")
        assert future.result(10).status == "cancelled"
        release.set()
        ctx = ref.context()
    assert not compacted(ctx)


def test_compaction_on_virtual_time_is_reproducible() -> None:
    def logs() -> list[tuple[str, Any]]:
        model = Counting()
        sim = Simulation(seed=3)
        ref = sim.spawn(compacting(model))
        for n in range(20):
            ref.run(prompt(n))
        ctx = ref.context()
        return [(e.type, e.data) for e in ctx.events]

    first = logs()
    assert [t for t, _ in first].count("compacted") >= 2
    assert logs() == first


def test_an_agent_without_compaction_logs_no_token_counts() -> None:
    model = Counting()
    with SyncDriver(Agent("plain", model=model)) as driver:
        driver.run("hi")
        headers = [e for e in driver.context.events if e.type == "request_header"]
    assert headers
    assert "tokens" not in headers[0].data


def test_compaction_needs_a_known_window_and_sane_options() -> None:
    with pytest.raises(AgentDefinitionError, match="context_window"):
        SyncDriver(Agent("a", model=Counting(), compaction=Compaction())).run("x")
    with pytest.raises(AgentDefinitionError, match="share of the window"):
        Compaction(at=1.5)
    with pytest.raises(AgentDefinitionError, match="keep_last_turns"):
        Compaction(keep_last_turns=0)
    with pytest.raises(AgentDefinitionError, match="context_window"):
        Agent("a", context_window=0)
    with pytest.raises(AgentDefinitionError, match="Compaction"):
        Agent("a", compaction="yes")  # type: ignore[arg-type]


def test_reported_usage_calibrates_the_count_and_a_restore_takes_it_up() -> None:
    from dataclasses import replace

    from actors.loop._loop import AgentLoop

    class Doubling(Counting):
        def answer(self, request: Any) -> Any:
            response = super().answer(request)
            usage = response.usage.model_copy(
                update={"input_tokens": 2 * response.usage.input_tokens}
            )
            return replace(response, usage=usage)

    model = Doubling()
    agent = compacting(model)
    with SyncDriver(agent) as driver:
        for n in range(12):
            driver.run(prompt(n))
        ratio = driver.loop._compactor.calibration.ratio  # type: ignore[union-attr]
        events = driver.context.events
    assert 1.9 <= ratio <= 2.1
    # Counted twice as large, it compacts twice as early: the provider's count stays within.
    assert compacted(AgentContext.from_events(events))
    assert all(2 * tokens <= int(WINDOW * 0.8) + 2 for tokens, _ in model.sent[1:])
    restored = AgentLoop(agent, AgentContext.from_events(events), model=model)
    assert restored._compactor is not None
    assert restored._compactor.calibration.ratio == ratio


def test_a_summarizer_that_is_neither_model_nor_agent_is_refused() -> None:
    with pytest.raises(AgentDefinitionError, match="summarizer"):
        Compaction(summarizer=42)  # type: ignore[arg-type]
