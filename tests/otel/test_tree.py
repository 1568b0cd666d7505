"""One trace per tree: the spans of a research team, their parents, names, kinds, attributes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from opentelemetry.trace import SpanKind, StatusCode

from actors import Runtime
from actors.store import MemoryStore
from actors.testing import SyncDriver

from .helpers import Spans, attrs
from .team import team

TEAM_OUTLINE = [
    "invoke_agent lead",
    "  chat scripted",
    "  execute_tool researcher",
    "    invoke_agent researcher",
    "      chat scripted",
    "      execute_tool check",
    "        invoke_agent checker",
    "          chat scripted",
    "      chat scripted",
    "  execute_tool researcher",
    "    invoke_agent researcher",
    "      chat scripted",
    "      execute_tool check",
    "        invoke_agent checker",
    "          chat scripted",
    "      chat scripted",
    "  chat scripted",
]


def test_a_team_is_one_trace_with_each_child_under_the_call_that_started_it(spans: Spans) -> None:
    with MemoryStore() as store, Runtime() as runtime:
        result = runtime.spawn(team(), store=store, session_id="research").run("Research.")
    assert result.output == "Both agree."

    root = spans.one("invoke_agent lead")
    assert root.parent is None
    assert {span.context.trace_id for span in spans.all} == {root.context.trace_id}
    assert spans.outline(root) == TEAM_OUTLINE
    assert len(spans.all) == len(TEAM_OUTLINE)

    for child_id in ("lead-sub-1", "lead-sub-2"):
        run = spans.one("invoke_agent researcher", gen_ai__agent__id=child_id)
        call = spans.parent(run)
        assert call is not None
        assert attrs(call)["actors.subagent.id"] == child_id
        assert attrs(call)["gen_ai.tool.name"] == "researcher"
        assert attrs(call)["actors.subagent.status"] == "completed"
        # the delegated checker runs under the tool call that delegated it
        checker = spans.one("invoke_agent checker", gen_ai__agent__id=f"{child_id}-sub-1")
        check = spans.parent(checker)
        assert check is not None
        assert check.name == "execute_tool check"
        assert spans.parent(check) == run
        assert [e.name for e in check.events] == ["actors.delegated"]
        # a child's run lies within its call
        assert call.start_time <= run.start_time <= run.end_time <= call.end_time  # type: ignore[operator]


def test_spans_carry_the_genai_attributes(spans: Spans) -> None:
    with MemoryStore() as store, Runtime() as runtime:
        ref = runtime.spawn(team(), store=store, session_id="research")
        ref.run("Research.")
        log = ref.context().events

    root = spans.one("invoke_agent lead")
    assert root.kind is SpanKind.INTERNAL
    assert root.status.status_code is StatusCode.UNSET
    assert attrs(root) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "lead",
        "gen_ai.agent.id": "lead",
        "gen_ai.conversation.id": "research",
        "actors.run.id": "lead-run-1",
        "gen_ai.request.model": "scripted",
        "actors.run.outcome": "completed",
        "gen_ai.usage.input_tokens": sum(e.data["input_tokens"] for e in log if e.type == "usage"),
        "gen_ai.usage.output_tokens": sum(
            e.data["output_tokens"] for e in log if e.type == "usage"
        ),
    }

    first_chat, *_ = (s for s in spans.children(root) if s.name == "chat scripted")
    usage = next(e for e in log if e.type == "usage")
    assert first_chat.kind is SpanKind.CLIENT
    assert attrs(first_chat) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "scripted",
        "gen_ai.conversation.id": "research",
        "gen_ai.usage.input_tokens": usage.data["input_tokens"],
        "gen_ai.usage.output_tokens": usage.data["output_tokens"],
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "gen_ai.response.model": "scripted",
    }

    calls = [e.data for e in log if e.type == "tool_call"]
    tool_spans = [s for s in spans.children(root) if s.name == "execute_tool researcher"]
    assert [attrs(s)["gen_ai.tool.call.id"] for s in tool_spans] == [
        c["tool_call_id"] for c in calls
    ]
    assert all(s.kind is SpanKind.INTERNAL for s in tool_spans)
    assert attrs(tool_spans[0])["gen_ai.operation.name"] == "execute_tool"
    assert attrs(tool_spans[0])["gen_ai.tool.type"] == "function"

    child = spans.one("invoke_agent researcher", gen_ai__agent__id="lead-sub-1")
    assert attrs(child)["actors.agent.parent_id"] == "lead"
    assert attrs(child)["gen_ai.conversation.id"] == "research"  # the session of the tree


def test_span_times_are_the_times_of_the_events(spans: Spans) -> None:
    with Runtime() as runtime:
        ref = runtime.spawn(team())
        ref.run("Research.")
        log = ref.context().events

    root = spans.one("invoke_agent lead")
    chats = [s for s in spans.children(root) if s.name == "chat scripted"]

    def ns(index: int) -> int:
        since = log[index].created_at - datetime(1970, 1, 1, tzinfo=UTC)
        return since // timedelta(microseconds=1) * 1000

    kinds = [e.type for e in log]
    assert root.start_time == ns(kinds.index("turn_start"))
    assert root.end_time == ns(kinds.index("turn_end"))
    assert chats[0].start_time == ns(kinds.index("step_start"))
    assert chats[0].end_time == ns(kinds.index("step_end"))


def test_a_provider_model_names_its_provider(spans: Spans) -> None:
    from actors import Agent
    from actors.testing import ScriptedModel

    class Named(ScriptedModel):
        @property
        def name(self) -> str:
            return "anthropic:claude-sonnet-4-5"

    with Runtime() as runtime:
        runtime.spawn(Agent("a", model=Named(["Hi."]))).run("Hello")
    chat = spans.one("chat claude-sonnet-4-5")
    assert attrs(chat)["gen_ai.provider.name"] == "anthropic"
    assert attrs(chat)["gen_ai.request.model"] == "claude-sonnet-4-5"
    run = spans.one("invoke_agent a")
    assert attrs(run)["gen_ai.provider.name"] == "anthropic"
    assert "gen_ai.conversation.id" not in attrs(run)  # no store, no session


def test_the_sync_driver_makes_the_same_spans(spans: Spans) -> None:
    with SyncDriver(team()) as driver:
        driver.run("Research.")
    root = spans.one("invoke_agent lead")
    assert spans.outline(root) == TEAM_OUTLINE


def test_cached_input_tokens_are_span_attributes(spans: Spans) -> None:
    from actors import Agent, AssistantMessage, ModelResponse, Usage
    from actors.testing import FunctionModel

    def reply(messages: object, tools: object) -> ModelResponse:
        usage = Usage(requests=1, input_tokens=90, output_tokens=4, cache_read_tokens=64)
        return ModelResponse(AssistantMessage(content="ok"), usage)

    with Runtime() as runtime:
        runtime.spawn(Agent("cacher", model=FunctionModel(reply, name="fn"))).run("hi")
    run = spans.one("invoke_agent cacher")
    assert attrs(run)["gen_ai.usage.cache_read.input_tokens"] == 64
    assert "gen_ai.usage.cache_creation.input_tokens" not in attrs(run)
    (chat,) = [s for s in spans.children(run) if s.name == "chat fn"]
    assert attrs(chat)["gen_ai.usage.cache_read.input_tokens"] == 64
    assert attrs(chat)["gen_ai.usage.input_tokens"] == 90
