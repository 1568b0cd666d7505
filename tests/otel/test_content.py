"""Message content is recorded only when the user opts in; a tool_context never is."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from actors import Agent, RunContext, Runtime, tool
from actors.otel import CAPTURE_ENV
from actors.testing import ScriptedModel, call

from .helpers import Spans, attrs

SECRET = "sk-secret-4242"

CONTENT_KEYS = {
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
}


@tool
def weather(ctx: RunContext, city: str) -> str:
    """Look up the weather.

    Args:
        city: The city.
    """
    assert ctx.tool_context["api_key"] == SECRET
    return f"{city}: sunny"


def forecaster() -> Agent:
    return Agent(
        "forecaster",
        model=ScriptedModel([call("weather", city="Paris"), "Sunny in Paris."]),
        instructions="Answer in one sentence.",
        system_prompt="You forecast weather.",
        tools=[weather],
    )


def run_forecaster() -> None:
    with Runtime() as runtime:
        ref = runtime.spawn(forecaster(), tool_context={"api_key": SECRET})
        assert ref.run("Weather in Paris?").output == "Sunny in Paris."


def everything_recorded(spans: Spans) -> str:
    """Every attribute and event of every span, as one text."""
    parts = []
    for span in spans.all:
        parts.append(json.dumps(attrs(span), default=str))
        parts += [json.dumps(dict(e.attributes or {}), default=str) for e in span.events]
        parts.append(str(span.status.description))
    return "\n".join(parts)


def test_no_content_by_default(spans: Spans, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CAPTURE_ENV, raising=False)
    run_forecaster()
    for span in spans.all:
        assert not CONTENT_KEYS & set(attrs(span)), span.name
    text = everything_recorded(spans)
    for word in ("Paris", "sunny", "You forecast", "one sentence", SECRET):
        assert word not in text


def test_content_when_asked(tracing: Callable[..., Spans]) -> None:
    spans = tracing(capture_content=True)
    run_forecaster()

    run = spans.one("invoke_agent forecaster")
    assert json.loads(attrs(run)["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}
    ]
    assert json.loads(attrs(run)["gen_ai.output.messages"]) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "Sunny in Paris."}]}
    ]

    first, second = sorted(spans.named("chat scripted"), key=lambda s: s.start_time or 0)
    assert json.loads(attrs(first)["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "Answer in one sentence."}
    ]
    assert json.loads(attrs(first)["gen_ai.input.messages"]) == [
        {"role": "system", "parts": [{"type": "text", "content": "You forecast weather."}]},
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]},
    ]
    (reply,) = json.loads(attrs(first)["gen_ai.output.messages"])
    assert reply["finish_reason"] == "tool_calls"
    (part,) = reply["parts"]
    assert part["type"] == "tool_call"
    assert (part["name"], part["arguments"]) == ("weather", {"city": "Paris"})
    history = json.loads(attrs(second)["gen_ai.input.messages"])
    assert [m["role"] for m in history] == ["system", "user", "assistant", "tool"]
    assert history[-1]["parts"] == [
        {"type": "tool_call_response", "id": part["id"], "response": "Paris: sunny"}
    ]

    tool_span = spans.one("execute_tool weather")
    assert json.loads(attrs(tool_span)["gen_ai.tool.call.arguments"]) == {"city": "Paris"}
    assert attrs(tool_span)["gen_ai.tool.call.result"] == "Paris: sunny"

    assert SECRET not in everything_recorded(spans)  # the tool_context, never


def test_content_from_the_environment(
    tracing: Callable[..., Spans], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CAPTURE_ENV, "true")
    spans = tracing()
    run_forecaster()
    assert "gen_ai.tool.call.result" in attrs(spans.one("execute_tool weather"))


def test_an_explicit_no_wins_over_the_environment(
    tracing: Callable[..., Spans], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CAPTURE_ENV, "true")
    spans = tracing(capture_content=False)
    run_forecaster()
    assert "gen_ai.tool.call.result" not in attrs(spans.one("execute_tool weather"))


def test_parts_are_recorded_without_their_data(tracing: Callable[..., Spans]) -> None:
    """An image, a PDF and a URL in the transcript: kinds, types and sizes, never base64."""
    from actors import AgentContext, DocumentPart, ImagePart, ToolResultMessage, UserMessage
    from actors.otel._content import Transcript, content_text
    from actors.store.conformance import screenshot

    shot = screenshot(1)
    pdf = DocumentPart(data=b"%PDF-1.4 x", media_type="application/pdf", name="r.pdf")
    link = ImagePart(url="https://example.com/a.png", media_type="image/png")
    ctx = AgentContext("a")
    ctx.add_message(UserMessage(content=["look", shot, link]))
    ctx.add_message(ToolResultMessage(tool_call_id="c", tool_name="fetch", content=["got", pdf]))
    transcript = Transcript()
    for event in ctx.events:
        transcript.read(event)
    assert transcript.messages == [
        {
            "role": "user",
            "parts": [
                {"type": "text", "content": "look"},
                {"type": "image", "mime_type": "image/png", "size": shot.size},
                {
                    "type": "uri",
                    "modality": "image",
                    "mime_type": "image/png",
                    "uri": "https://example.com/a.png",
                },
            ],
        },
        {
            "role": "tool",
            "parts": [
                {
                    "type": "tool_call_response",
                    "id": "c",
                    "response": "got\n[document application/pdf, 10 B, r.pdf]",
                }
            ],
        },
    ]
    assert content_text(ctx.events[0].data["content"]) == (
        "look\n[image image/png, 1.5 kB]\n[image image/png, https://example.com/a.png]"
    )
    assert shot.data is not None
    assert shot.data[:40] not in json.dumps(transcript.messages)
