"""Message parts: what the doors accept and refuse, and what the log holds."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from actors import (
    Agent,
    AgentContext,
    AudioPart,
    ContextUpdate,
    DocumentPart,
    ImagePart,
    InvalidContentError,
    RunContext,
    Runtime,
    TextPart,
    UserMessage,
    file_part,
    tool,
)
from actors.context._parts import content_text, describe_content
from actors.exceptions import InvalidUpdateError, UserError
from actors.host.conformance import PDF, PNG
from actors.testing import FunctionModel

JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 40


def test_a_part_keeps_its_bytes_as_base64_and_reports_size_and_hash() -> None:
    part = ImagePart(data=PNG, media_type="image/png")
    assert part.data == base64.b64encode(PNG).decode()
    assert part.bytes == PNG
    assert part.size == len(PNG)
    assert ImagePart(data=part.data, media_type="image/png") == part
    assert len(part.sha256) == 64
    assert repr(part) == f"ImagePart(image/png, {len(PNG)} bytes)"


def test_a_data_url_is_read_as_data_and_media_type() -> None:
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    part = ImagePart(url=url)
    assert (part.media_type, part.bytes, part.url) == ("image/png", PNG, None)


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"data": JPEG, "media_type": "image/png"}, "not a PNG image"),
        ({"data": "not base64!", "media_type": "image/png"}, "not valid base64"),
        ({"data": b"", "media_type": "image/png"}, "empty"),
        ({"data": PNG, "media_type": "audio/wav"}, "image/* media type"),
        ({"data": PNG, "media_type": "image png"}, "not a media type"),
        ({"data": PNG}, "needs its media_type"),
        ({"url": "file:///etc/passwd"}, "http(s)"),
        ({"data": PNG, "media_type": "image/png", "url": "https://x/a.png"}, "exactly one"),
    ],
)
def test_an_image_that_is_not_what_it_claims_is_refused(
    fields: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ValidationError, match=re.escape(problem)):
        ImagePart(**fields)


def test_kinds_and_their_media_types_must_agree() -> None:
    with pytest.raises(ValidationError, match="audio/"):
        AudioPart(data=b"RIFF....WAVE", media_type="image/png")
    with pytest.raises(ValidationError, match="use ImagePart"):
        DocumentPart(data=PNG, media_type="image/png")
    with pytest.raises(ValidationError, match="not a PDF"):
        DocumentPart(data=b"hello", media_type="application/pdf")
    assert DocumentPart(data=b"hello", media_type="text/plain").size == 5


def test_file_part_reads_a_file_and_picks_the_kind_by_its_media_type(tmp_path: Path) -> None:
    (tmp_path / "shot.png").write_bytes(PNG)
    (tmp_path / "doc.pdf").write_bytes(PDF)
    image = file_part(tmp_path / "shot.png")
    assert isinstance(image, ImagePart)
    assert (image.media_type, image.name, image.bytes) == ("image/png", "shot.png", PNG)
    assert isinstance(file_part(str(tmp_path / "doc.pdf")), DocumentPart)
    with pytest.raises(InvalidContentError, match="media_type="):
        file_part(b"\x00\x01")
    with pytest.raises(InvalidContentError, match="not a PNG"):
        file_part(JPEG, "image/png")
    assert isinstance(InvalidContentError("x"), UserError)


def test_a_message_takes_strs_and_parts_and_logs_them_as_plain_json() -> None:
    image = ImagePart(data=PNG, media_type="image/png")
    message = UserMessage(content=["look at \ud800 this", image])
    assert message.content == (TextPart(text="look at \ufffd this"), image)
    assert message.text == "look at \ufffd this"
    assert describe_content(message.content) == (
        f"look at \ufffd this\n[image image/png, {len(PNG)} B]"
    )
    ctx = AgentContext(agent_id="a")
    event = ctx.add_message(message)
    assert event.data["content"] == [
        {"type": "text", "text": "look at \ufffd this"},
        {"type": "image", "media_type": "image/png", "data": image.data},
    ]
    json.dumps(event.data)  # plain JSON, no bytes
    again = AgentContext.deserialize(ctx.serialize())
    assert again.messages == ctx.messages
    with pytest.raises(ValidationError, match="empty sequence"):
        UserMessage(content=[])


def test_a_lone_surrogate_in_a_part_is_replaced_like_any_text() -> None:
    part = ImagePart(url="https://x.test/\ud800.png", media_type="image/png", name="a\udc00")
    assert (part.url, part.name) == ("https://x.test/\ufffd.png", "a\ufffd")
    json.dumps(UserMessage(content=[part]).model_dump(mode="json"), ensure_ascii=False).encode()


def test_content_text_joins_the_text_parts_only() -> None:
    image = ImagePart(data=PNG, media_type="image/png")
    assert content_text((TextPart(text="a"), image, TextPart(text="b"))) == "a\nb"
    assert content_text("plain") == "plain"


def _echo_parts(messages: Any, tools: Any) -> str:
    """Answer with what the last user message held, part by part."""
    last = [m for m in messages if m.role == "user"][-1]
    if isinstance(last.content, str):
        return last.content
    return " + ".join(p.type for p in last.content)


def test_a_prompt_of_parts_runs_and_bad_prompts_are_refused_before_anything_starts() -> None:
    agent = Agent("eyes", model=FunctionModel(_echo_parts))
    with Runtime() as runtime:
        ref = runtime.spawn(agent)
        image = ImagePart(data=PNG, media_type="image/png")
        assert ref.run(["what is it?", image]).output == "text + image"
        assert ref.run(image).output == "image"
        for bad, problem in [(42, "got int"), ([], "empty"), ([b"raw"], "holds a bytes")]:
            with pytest.raises(InvalidContentError, match=problem):
                ref.run(bad)  # type: ignore[arg-type]
        events = [e.type for e in ref.context().events]
        assert events.count("turn_start") == 2  # the refused prompts started nothing


@tool
def snapshot(ctx: RunContext[Any]) -> Any:
    """Return two strings (JSON, not parts) and then, called again, an image."""
    if ctx.metadata.get("shot"):
        return ["caption", ImagePart(data=PNG, media_type="image/png")]
    return ["just", "text"], ContextUpdate().set("shot", True)


def test_a_tool_returning_parts_gives_a_result_of_parts_and_a_list_of_strs_stays_json() -> None:
    def script(messages: Any, tools: Any) -> Any:
        from actors import ToolCall

        results = [m for m in messages if m.role == "tool"]
        if len(results) < 2:
            return ToolCall(id=f"c{len(results)}", name="snapshot", arguments={})
        return "done"

    agent = Agent("shooter", model=FunctionModel(script), tools=[snapshot])
    with Runtime() as runtime:
        result = runtime.spawn(agent).run("go")
    first, second = [m for m in result.messages if m.role == "tool"]
    assert first.content == '["just","text"]'
    assert second.content == (TextPart(text="caption"), ImagePart(data=PNG, media_type="image/png"))


def test_a_peer_send_of_something_that_is_not_content_is_refused() -> None:
    with pytest.raises(InvalidUpdateError, match=r"json\.dumps"):
        ContextUpdate().send("bob", {"not": "content"})  # type: ignore[arg-type]
    update = ContextUpdate().send("bob", ["hi", ImagePart(data=PNG, media_type="image/png")])
    (op,) = update.to_json()
    assert ContextUpdate.from_json([op]).to_json() == [op]


def test_steering_with_parts_joins_the_transcript() -> None:
    agent = Agent("eyes", model=FunctionModel(_echo_parts))
    with Runtime() as runtime:
        ref = runtime.spawn(agent)
        ref.send(["also this", ImagePart(data=PNG, media_type="image/png")])
        assert ref.run("and?").output == "and?"
        users = [m for m in ref.context().messages if m.role == "user"]
        assert [m.text for m in users] == ["also this", "and?"]
        assert isinstance(users[0].content[1], ImagePart)
