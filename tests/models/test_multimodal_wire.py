"""Images, audio and files over both wire formats, against the loopback provider (its own process).

The server checks parts as a provider does (bench/wire_parts.py) and records the SHA-256 of
every part's bytes, so these tests see what arrived, not what we meant to send.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import struct
import time
import zlib
from collections.abc import Iterator
from typing import Any

import pytest

from actors import (
    AudioPart,
    DocumentPart,
    ImagePart,
    InvalidContentError,
    ModelRequest,
    ToolCall,
    ToolDefinition,
    ToolResultMessage,
    UserMessage,
    file_part,
)
from actors.context._messages import AssistantMessage, SystemMessage
from actors.exceptions import ModelHTTPError, UnsupportedContentError
from actors.models import (
    Accepts,
    AnthropicModel,
    FallbackModel,
    OpenAIChatModel,
    RetryPolicy,
)
from bench.wire_server import serve, stats

ONCE = RetryPolicy(max_attempts=1)


def png(width: int = 2, height: int = 2) -> bytes:
    """A small, whole PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


PNG = png()
PDF = b"%PDF-1.4\n1 0 obj << /Type /Page >> endobj\ntrailer\n%%EOF\n"
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\x00" * 28


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="module")
def wire() -> Iterator[str]:
    with serve(cache=True) as url:
        yield url


def openai(url: str, **kwargs: Any) -> OpenAIChatModel:
    return OpenAIChatModel("gpt-test", base_url=url, retry=ONCE, **kwargs)


def anthropic(url: str, **kwargs: Any) -> AnthropicModel:
    return AnthropicModel("claude-test", base_url=url[: -len("/v1")], retry=ONCE, **kwargs)


def ask(model: Any, *messages: Any, stream: bool = False, **fields: Any) -> Any:
    async def main() -> Any:
        async with model:
            request = ModelRequest(
                messages=list(messages), settings={"stream": stream}, agent_id="a", **fields
            )
            return await model.request(request)

    return asyncio.run(main())


def received(url: str, count: int) -> list[tuple[str, str, str]]:
    """The last ``count`` parts the server accepted: kind, media type, SHA-256."""
    parts = stats(url)["parts"][-count:]
    return [(p["kind"], p["media_type"], p["sha256"]) for p in parts]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_openai_sends_an_image_a_pdf_and_audio_in_its_content_parts(
    wire: str, stream: bool
) -> None:
    message = UserMessage(
        content=(
            "Describe these.",
            ImagePart(data=PNG, media_type="image/png"),
            DocumentPart(data=PDF, media_type="application/pdf", name="report.pdf"),
            AudioPart(data=WAV, media_type="audio/wav"),
        )
    )
    response = ask(openai(wire), message, stream=stream)
    assert response.message.content.startswith("reply ")
    assert received(wire, 3) == [
        ("image", "image/png", sha(PNG)),
        ("document", "application/pdf", sha(PDF)),
        ("audio", "audio/wav", sha(WAV)),
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_anthropic_sends_an_image_a_pdf_and_a_text_document_as_blocks(
    wire: str, stream: bool
) -> None:
    message = UserMessage(
        content=(
            "Describe these.",
            ImagePart(data=PNG, media_type="image/png"),
            DocumentPart(data=PDF, media_type="application/pdf", name="report.pdf"),
            DocumentPart(data=b"plain words", media_type="text/plain"),
            ImagePart(url="https://example.com/cat.png"),
        )
    )
    response = ask(anthropic(wire), message, stream=stream)
    assert response.message.content.startswith("reply ")
    assert received(wire, 3) == [
        ("image", "image/png", sha(PNG)),
        ("document", "application/pdf", sha(PDF)),
        ("document", "text/plain", sha(b"plain words")),
    ]


def test_a_tool_result_with_an_image_reaches_both_formats(wire: str) -> None:
    call = ToolCall(id="call_1", name="screenshot", arguments={})
    image = ImagePart(data=PNG, media_type="image/png")
    doc = DocumentPart(data=PDF, media_type="application/pdf")
    transcript = [
        UserMessage(content="Take a screenshot."),
        AssistantMessage(content="", tool_calls=(call,)),
        ToolResultMessage(
            tool_call_id="call_1", tool_name="screenshot", content=("Here it is:", image, doc)
        ),
    ]
    # OpenAI: the tool message carries the text, a user message after it the parts.
    ask(openai(wire), *transcript)
    assert received(wire, 2) == [
        ("image", "image/png", sha(PNG)),
        ("document", "application/pdf", sha(PDF)),
    ]
    # Anthropic: the image inside the tool_result, the PDF after the step's results.
    ask(anthropic(wire), *transcript)
    assert received(wire, 2) == [
        ("image", "image/png", sha(PNG)),
        ("document", "application/pdf", sha(PDF)),
    ]


def test_bytes_that_are_not_the_image_they_claim_are_refused_at_the_door() -> None:
    with pytest.raises(ValueError, match="not a PNG"):
        ImagePart(data=b"not png", media_type="image/png")
    with pytest.raises(InvalidContentError, match="not a PNG"):
        file_part(b"not png", "image/png")


@pytest.mark.parametrize("flavour", ["openai", "anthropic"])
def test_an_image_the_provider_cannot_decode_is_a_typed_400_and_the_next_request_works(
    wire: str, flavour: str
) -> None:
    truncated = PNG[:-12]  # right magic bytes, no IEND chunk: our sniff lets it pass
    model = openai(wire) if flavour == "openai" else anthropic(wire)
    bad = UserMessage(content=("Look.", ImagePart(data=truncated, media_type="image/png")))
    with pytest.raises(ModelHTTPError) as caught:
        ask(model, bad)
    assert caught.value.status_code == 400
    assert "Could not process image" in caught.value.body
    model = openai(wire) if flavour == "openai" else anthropic(wire)
    assert ask(model, UserMessage(content="still there?")).message.content


@pytest.fixture(scope="module")
def big_pdf() -> tuple[bytes, DocumentPart]:
    big = b"%PDF-1.7\n" + bytes(range(256)) * (20 * 1024 * 1024 // 256)
    return big, DocumentPart(data=big, media_type="application/pdf", name="big.pdf")


@pytest.mark.parametrize("flavour", ["openai", "anthropic"])
def test_a_20_mb_pdf_is_sent_once_and_arrives_whole(
    wire: str, flavour: str, big_pdf: tuple[bytes, DocumentPart]
) -> None:
    big, part = big_pdf
    model = openai(wire) if flavour == "openai" else anthropic(wire)
    before = stats(wire)["requests"]
    started = time.monotonic()
    ask(model, UserMessage(content=("Summarize.", part)))
    elapsed = time.monotonic() - started
    assert stats(wire)["requests"] == before + 1
    assert received(wire, 1) == [("document", "application/pdf", sha(big))]
    assert elapsed < 30  # about 2 s on a loaded 2-core machine


def test_parts_a_model_does_not_take_are_refused_before_anything_is_sent(wire: str) -> None:
    before = stats(wire)["requests"]
    audio = UserMessage(content=("Listen.", AudioPart(data=WAV, media_type="audio/wav")))
    with pytest.raises(UnsupportedContentError) as caught:
        ask(anthropic(wire), audio)
    error = caught.value
    assert error.media_type == "audio/wav"
    assert "audio/wav" in error.part
    assert "image/png" in error.accepted
    assert "audio" not in error.accepted
    ogg = UserMessage(content=(AudioPart(data=b"OggS....", media_type="audio/ogg"),))
    with pytest.raises(UnsupportedContentError, match="audio/ogg"):
        ask(openai(wire), ogg)
    by_url = UserMessage(content=(AudioPart(url="https://example.com/a.wav"),))
    with pytest.raises(UnsupportedContentError, match="given by URL"):
        ask(openai(wire), by_url)
    big = png(1, 1) + b"\x00" * (5 * 1024 * 1024)  # past Anthropic's 5 MB an image
    with pytest.raises(UnsupportedContentError, match=r"at most 5\.0 MB"):
        ask(anthropic(wire), UserMessage(content=(ImagePart(data=big, media_type="image/png"),)))
    text_only = openai(wire, accepts=Accepts(media_types=()))
    image = UserMessage(content=(ImagePart(data=PNG, media_type="image/png"),))
    with pytest.raises(UnsupportedContentError, match="text only"):
        ask(text_only, image)
    assert stats(wire)["requests"] == before  # the server saw nothing


def test_a_fallback_model_skips_a_model_that_does_not_take_the_content(wire: str) -> None:
    model = FallbackModel(anthropic(wire), openai(wire))
    audio = UserMessage(content=("Listen.", AudioPart(data=WAV, media_type="audio/wav")))
    response = ask(model, audio)
    assert response.model_name == "gpt-test"
    (switch,) = response.fallbacks
    assert switch.error == "UnsupportedContentError"
    nobody = FallbackModel(anthropic(wire), openai(wire, accepts=Accepts(media_types=())))
    with pytest.raises(UnsupportedContentError, match="no model takes"):
        ask(nobody, audio)


WEATHER = ToolDefinition(
    "get_weather",
    "Weather of a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_cached_input_is_reported_by_both_formats(wire: str, stream: bool) -> None:
    system = SystemMessage(content=f"You answer about the weather ({stream=}). " * 40)
    first = ask(
        anthropic(wire), system, UserMessage(content="Paris?"), stream=stream, tools=[WEATHER]
    )
    again = ask(
        anthropic(wire), system, UserMessage(content="Rome?"), stream=stream, tools=[WEATHER]
    )
    assert first.usage.cache_write_tokens > 0
    assert first.usage.cache_read_tokens == 0
    assert again.usage.cache_read_tokens == first.usage.cache_write_tokens
    assert again.usage.input_tokens >= again.usage.cache_read_tokens  # input counts it too
    total = first.usage + again.usage
    assert total.cache_read_tokens == again.usage.cache_read_tokens
    assert total.cache_write_tokens == first.usage.cache_write_tokens
    # Without breakpoints Anthropic caches nothing.
    plain = ask(anthropic(wire, cache=None), system, UserMessage(content="Oslo?"), stream=stream)
    assert plain.usage.cache_read_tokens == plain.usage.cache_write_tokens == 0
    # OpenAI caches by itself, and reports reads only.
    ask(openai(wire), system, UserMessage(content="Paris?"), stream=stream)
    read = ask(openai(wire), system, UserMessage(content="Rome?"), stream=stream)
    assert read.usage.cache_read_tokens > 0
    assert read.usage.cache_write_tokens == 0


def test_anthropic_breakpoints_go_on_the_prompt_the_last_tool_and_optionally_the_last_message() -> (
    None
):
    model = AnthropicModel("claude-test", base_url="http://127.0.0.1:9", cache="conversation")
    request = ModelRequest(
        messages=[SystemMessage(content="Be brief."), UserMessage(content="Hi")],
        tools=[WEATHER, ToolDefinition("other", "Other.", {"type": "object"})],
    )
    body = model._body(request, {}, stream=False)
    ephemeral = {"type": "ephemeral"}
    assert body["system"] == [{"type": "text", "text": "Be brief.", "cache_control": ephemeral}]
    assert [tool.get("cache_control") for tool in body["tools"]] == [None, ephemeral]
    assert body["messages"][-1]["content"][-1]["cache_control"] == ephemeral
    off = AnthropicModel("claude-test", base_url="http://127.0.0.1:9", cache=None)
    body = off._body(request, {}, stream=False)
    assert body["system"] == "Be brief."
    assert all("cache_control" not in tool for tool in body["tools"])
    with pytest.raises(ValueError, match="cache must be"):
        AnthropicModel("claude-test", cache="always")  # type: ignore[arg-type]


def test_an_openai_tool_result_with_parts_is_text_then_a_user_message_after_the_step() -> None:
    model = OpenAIChatModel("gpt-test", base_url="http://127.0.0.1:9")
    calls = (
        ToolCall(id="c1", name="shot", arguments={}),
        ToolCall(id="c2", name="shot", arguments={}),
    )
    image = ImagePart(data=PNG, media_type="image/png", name="screen.png")
    request = ModelRequest(
        messages=[
            UserMessage(content="Two screenshots."),
            AssistantMessage(content="", tool_calls=calls),
            ToolResultMessage(tool_call_id="c1", tool_name="shot", content=("first", image)),
            ToolResultMessage(tool_call_id="c2", tool_name="shot", content="none"),
        ]
    )
    messages = model._body(request, {}, stream=False)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "user"]
    assert messages[2]["content"] == "first\n[image image/png, 73 B, screen.png]"
    caption, sent = messages[4]["content"]
    assert caption == {"type": "text", "text": "Attached to the result of shot (c1):"}
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert sent == {"type": "image_url", "image_url": {"url": url}}


def test_accepts_is_checked_when_made_and_a_model_with_one_still_pickles() -> None:
    import pickle

    with pytest.raises(ValueError, match="media_types"):
        Accepts(media_types="image/png")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="urls"):
        Accepts(urls=frozenset({"video"}))
    limits = {"image": 100}
    accepts = Accepts(media_types=["IMAGE/*"], max_bytes=limits)  # type: ignore[arg-type]
    limits["image"] = 1
    assert accepts.media_types == ("image/*",)
    assert accepts.max_bytes == {"image": 100}
    model = pickle.loads(
        pickle.dumps(OpenAIChatModel("gpt", base_url="http://x/v1", accepts=accepts))
    )
    assert model.accepts == accepts
