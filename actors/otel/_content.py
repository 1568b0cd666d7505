"""Message content for spans, kept only when the user opts in: the transcript in the GenAI shape.

The conventions' message shape is ``{"role", "parts": [...]}`` with ``text``, ``tool_call`` and
``tool_call_response`` parts; span attributes hold it as a JSON string (the SDK takes no nested
values on spans). The transcript is projected from the log as `AgentContext` does: surface
events append a message, ``replace`` events shadow a range of them.

A message's images, audio and documents never reach a span as base64: a part with data is a
``{"type": "image", "mime_type", "size"}`` part (a generic part of the conventions), one with
a URL a ``uri`` part, and in text (a tool's result, steering) a ``[image image/png, 12.3 kB]``
placeholder.
"""

from __future__ import annotations

import json
from typing import Any

from actors import Event, describe_content

__all__ = ["Transcript", "as_json", "content_text", "message_of"]

_KINDS = frozenset({"image", "audio", "document"})


def _size(data: str) -> int:
    return len(data) * 3 // 4 - data.endswith("=") - data.endswith("==")


def content_text(content: object) -> str:
    """A logged message's content as text: a binary part as a placeholder, never its data."""
    return describe_content(content)


def _parts_of(content: object) -> list[dict[str, Any]]:
    if not isinstance(content, list):
        text = content_text(content)
        return [{"type": "text", "content": text}] if text else []
    parts: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text":
            parts.append({"type": "text", "content": str(part.get("text", ""))})
        elif kind in _KINDS and isinstance(part.get("url"), str):
            mime = part.get("media_type")
            parts.append({"type": "uri", "modality": kind, "mime_type": mime, "uri": part["url"]})
        elif kind in _KINDS:
            size = _size(part["data"]) if isinstance(part.get("data"), str) else 0
            parts.append({"type": kind, "mime_type": part.get("media_type"), "size": size})
    return parts


def message_of(data: dict[str, Any]) -> dict[str, Any]:
    """One logged message (a surface event's data) in the conventions' shape."""
    role = str(data.get("role") or "user")
    content = data.get("content")
    if role == "tool":
        response = content_text(content)
        part = {"type": "tool_call_response", "id": data.get("tool_call_id"), "response": response}
        return {"role": "tool", "parts": [part]}
    parts = _parts_of(content)
    for call in data.get("tool_calls") or ():
        if isinstance(call, dict):
            parts.append(
                {
                    "type": "tool_call",
                    "id": call.get("id"),
                    "name": call.get("name"),
                    "arguments": call.get("arguments"),
                }
            )
    return {"role": role, "parts": parts}


def as_json(value: Any) -> str:
    """A JSON string for an attribute (non-JSON values are shown by ``str``)."""
    return json.dumps(value, ensure_ascii=False, default=str)


class Transcript:
    """The messages of one agent's log, in the conventions' shape, as the log grows."""

    __slots__ = ("messages",)

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def read(self, event: Event) -> dict[str, Any] | None:
        """Fold one event in; returns the message it added or put in place, if any."""
        kind, data = event.type, event.data
        if kind in ("system_message", "user_message", "assistant_message", "tool_result"):
            message = message_of(data)
            self.messages.append(message)
            return message
        if kind in ("replace", "compacted"):
            first, last, replacement = data.get("first"), data.get("last"), data.get("message")
            kept = data.get("kept") or []  # a compaction's pinned messages stay after it
            if (
                isinstance(first, int)
                and isinstance(last, int)
                and isinstance(replacement, dict)
                and 0 <= first <= last < len(self.messages)
                and all(isinstance(k, int) and first < k <= last for k in kept)
            ):
                message = message_of(replacement)
                staying = [self.messages[k] for k in kept]
                self.messages[first : last + 1] = [message, *staying]
                return message
        return None
