"""Cached input tokens that providers report reach a run's usage, the log, a restore and OTel."""

from __future__ import annotations

from typing import Any

from actors import (
    Agent,
    AgentContext,
    AssistantMessage,
    ModelResponse,
    Runtime,
    Usage,
)
from actors.context._snapshot import take_snapshot
from actors.store import SQLiteStore
from actors.testing import FunctionModel


def cached_reply(messages: Any, tools: Any) -> ModelResponse:
    usage = Usage(
        requests=1, input_tokens=100, output_tokens=5, cache_read_tokens=80, cache_write_tokens=12
    )
    return ModelResponse(AssistantMessage(content="ok"), usage)


def test_cache_counts_add_up_in_the_run_the_context_and_a_restore(tmp_path: Any) -> None:
    agent = Agent("cached", model=FunctionModel(cached_reply))
    store = SQLiteStore(tmp_path / "s.sqlite")
    with Runtime() as runtime:
        ref = runtime.open_session(agent, session_id="s", store=store)
        first = ref.run("one")
        second = ref.run("two")
        ctx = ref.context()
    assert (first.usage.cache_read_tokens, first.usage.cache_write_tokens) == (80, 12)
    assert (second.usage.cache_read_tokens, second.usage.cache_write_tokens) == (80, 12)
    assert (ctx.usage.cache_read_tokens, ctx.usage.cache_write_tokens) == (160, 24)
    usage_events = [e.data for e in ctx.events if e.type == "usage"]
    assert usage_events[0]["cache_read_tokens"] == 80
    # Folded again from the log, from a snapshot, and in a new runtime over the same store.
    assert AgentContext.from_events(ctx.events, agent_id=ctx.agent_id).usage == ctx.usage
    assert take_snapshot(ctx)["used"][4:] == [160, 24]
    with Runtime() as runtime:
        restored = runtime.restore("s", store=store, agents=[agent])
        assert restored.context().usage == ctx.usage
        assert restored.run("three").usage.cache_read_tokens == 80
    store.close()


def test_a_usage_without_caching_is_logged_as_before() -> None:
    ctx = AgentContext(agent_id="a")
    event = ctx.add_usage(Usage(requests=1, input_tokens=3, output_tokens=2))
    assert event is not None
    assert event.data == {"requests": 1, "input_tokens": 3, "output_tokens": 2, "tool_calls": 0}
    assert take_snapshot(ctx)["used"] == [1, 3, 2, 0]
