"""Anthropic's Messages API, the request side: a transcript as turns of content blocks.

Parts of a user message become content blocks: ``image`` (a base64 or URL source), ``document``
(a PDF as a base64 or URL source, a text document as a text source) and ``text``. A tool
result holds text and image blocks; its documents follow the step's tool results in the same
user turn (the API wants a turn's tool results first). Claude reads no audio.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from actors.context._messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
)
from actors.context._parts import BinaryPart, Content, TextPart, describe_part
from actors.exceptions import UnsupportedContentError
from actors.models._accepts import ANTHROPIC_ACCEPTS

__all__ = ["anthropic_turns"]


def anthropic_turns(messages: Sequence[Message], model: str) -> list[dict[str, Any]]:
    """The transcript as alternating turns of content blocks (system messages left out)."""
    turns: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            continue
        role, blocks = _blocks(message, model)
        if not blocks:
            continue
        # Consecutive messages of one role share a turn: tool results of one step go
        # together, and a user message after them joins their turn (results first).
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:
        content = turn["content"]
        if turn["role"] == "user" and len(content) > 1:
            # The API wants a turn's tool results before anything else in it (the documents
            # a tool returned follow them); a stable sort keeps every other order.
            content.sort(key=lambda block: block["type"] != "tool_result")
    return turns


def _blocks(message: Message, model: str) -> tuple[str, list[dict[str, Any]]]:
    if isinstance(message, ToolResultMessage):
        content = message.content
        inside: str | list[dict[str, Any]]
        after: list[dict[str, Any]] = []
        if isinstance(content, str):
            inside = content
        else:
            # A tool result holds text and images; a document follows the step's results.
            inside = []
            for part in content:
                piece = _part(part, model)
                if piece is not None:
                    (after if piece["type"] == "document" else inside).append(piece)
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id,
            "content": inside,
        }
        if message.is_error:
            block["is_error"] = True
        return "user", [block, *after]
    if isinstance(message, AssistantMessage):
        # The API refuses empty text blocks.
        blocks: list[dict[str, Any]] = []
        if message.content:
            blocks.append({"type": "text", "text": message.content})
        blocks += [
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
            for call in message.tool_calls
        ]
        return "assistant", blocks
    assert isinstance(message, UserMessage)
    return "user", _user_blocks(message.content, model)


def _user_blocks(content: Content, model: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [block for part in content if (block := _part(part, model)) is not None]


def _part(part: TextPart | BinaryPart, model: str) -> dict[str, Any] | None:
    """One part as a content block (``accepts`` has let it through); None for empty text."""
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text} if part.text else None
    if part.type == "image":
        source: dict[str, Any]
        if part.url is not None:
            source = {"type": "url", "url": part.url}
        else:
            source = {"type": "base64", "media_type": part.media_type, "data": part.data}
        return {"type": "image", "source": source}
    if part.type == "document":
        if part.url is not None:
            source = {"type": "url", "url": part.url}  # the API fetches PDFs by URL
        elif part.media_type.startswith("text/"):
            text = part.bytes.decode("utf-8", "replace")
            source = {"type": "text", "media_type": "text/plain", "data": text}
        elif part.media_type == "application/pdf":
            source = {"type": "base64", "media_type": part.media_type, "data": part.data}
        else:
            raise _unsendable(part, model, f"{part.media_type} documents (PDF and text only)")
        block = {"type": "document", "source": source}
        if part.name:
            block["title"] = part.name
        return block
    # A model told it takes more (``accepts=``) still cannot send what the API lacks.
    raise _unsendable(part, model, "audio")


def _unsendable(part: BinaryPart, model: str, what: str) -> UnsupportedContentError:
    return UnsupportedContentError(
        f"{model}: the Messages API cannot carry {what}: {describe_part(part)}. Nothing was sent",
        model,
        describe_part(part),
        part.media_type,
        ANTHROPIC_ACCEPTS.describe(),
    )
