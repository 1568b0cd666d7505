"""OpenAI Chat Completions, the request side: a transcript as Chat Completions messages.

Parts of a user message become content parts: ``text``, ``image_url`` (a data: URL or the
image's URL), ``input_audio`` (base64, ``wav`` or ``mp3``) and ``file`` (a PDF as a data: URL);
a text document goes as text. A tool message takes text only, so a tool result holding images,
audio or files is sent as its text (each binary part as a placeholder like ``[image image/png,
12.3 kB]``), and its parts follow in a user message after the step's tool messages.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from actors.context._messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from actors.context._parts import BinaryPart, Content, TextPart, describe_content, describe_part
from actors.exceptions import UnsupportedContentError
from actors.models._accepts import OPENAI_ACCEPTS
from actors.models._arguments import INVALID_ARGUMENTS_KEY

__all__ = ["arguments_text", "openai_messages"]


def openai_messages(messages: Iterable[Message], model: str) -> list[dict[str, Any]]:
    """The transcript as Chat Completions messages.

    A tool result's binary parts go in a user message after the step's tool messages: the
    API wants every tool message of a step right after the assistant message that called.
    """
    out: list[dict[str, Any]] = []
    attached: list[dict[str, Any]] = []
    for message in messages:
        if attached and not isinstance(message, ToolResultMessage):
            out.append({"role": "user", "content": attached})
            attached = []
        if isinstance(message, SystemMessage):
            out.append({"role": "system", "content": message.content})
        elif isinstance(message, UserMessage):
            out.append({"role": "user", "content": _content(message.content, model)})
        elif isinstance(message, ToolResultMessage):
            # Chat Completions has no error flag on tool results; the content says what failed.
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": message.tool_call_id,
                    "content": describe_content(message.content),
                }
            )
            content = message.content
            binary = [] if isinstance(content, str) else [p for p in content if p.type != "text"]
            if binary:
                caption = f"Attached to the result of {message.tool_name} ({message.tool_call_id}):"
                attached.append({"type": "text", "text": caption})
                attached += [_part(part, model) for part in binary]
        else:
            out.append(_assistant_message(message))
    if attached:
        out.append({"role": "user", "content": attached})
    return out


def _assistant_message(message: AssistantMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": message.content or None}
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": arguments_text(call)},
            }
            for call in message.tool_calls
        ]
    return out


def _content(content: Content, model: str) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    return [_part(part, model) for part in content]


# Chat Completions names audio by format, and knows two.
_AUDIO_FORMATS = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
}


def _part(part: TextPart | BinaryPart, model: str) -> dict[str, Any]:
    """One content part in the wire format (``accepts`` has let it through)."""
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if part.type == "image":
        return {"type": "image_url", "image_url": {"url": part.data_url()}}
    if part.data is None:
        # A model told it takes more (``accepts=``) still cannot send what the API lacks.
        raise _unsendable(part, model, f"{part.type}s given by URL")
    if part.type == "audio":
        audio_format = _AUDIO_FORMATS.get(part.media_type)
        if audio_format is None:
            raise _unsendable(part, model, f"{part.media_type} audio (only wav and mp3)")
        return {"type": "input_audio", "input_audio": {"data": part.data, "format": audio_format}}
    if part.media_type.startswith("text/"):
        header = f"[{part.name or 'document'} ({part.media_type})]"
        return {"type": "text", "text": header + "\n" + part.bytes.decode("utf-8", "replace")}
    name = part.name or "document." + part.media_type.rpartition("/")[2]
    return {"type": "file", "file": {"filename": name, "file_data": part.data_url()}}


def _unsendable(part: BinaryPart, model: str, what: str) -> UnsupportedContentError:
    return UnsupportedContentError(
        f"{model}: Chat Completions cannot carry {what}: {describe_part(part)}. Nothing was sent",
        model,
        describe_part(part),
        part.media_type,
        OPENAI_ACCEPTS.describe(),
    )


def arguments_text(call: ToolCall) -> str:
    """A call's arguments as JSON text; bad text the model wrote goes back as it was."""
    raw = call.arguments.get(INVALID_ARGUMENTS_KEY)
    if isinstance(raw, str) and len(call.arguments) == 1:
        return raw
    return json.dumps(call.arguments, ensure_ascii=False)
