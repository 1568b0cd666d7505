"""Anthropic's Messages API, the reply side: a whole reply's usage and stop reason, and streams.

Shapes follow Anthropic's streaming guide: events ``message_start``, ``content_block_start`` /
``_delta`` / ``_stop``, ``message_delta``, ``message_stop``, ``ping`` and ``error``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from actors.context._messages import AssistantMessage, ToolCall
from actors.context._usage import Usage
from actors.exceptions import ModelHTTPError, UnexpectedModelResponse
from actors.models._arguments import parse_arguments
from actors.models._base import StreamAssembler
from actors.models._errors import excerpt
from actors.models._model import ModelResponse, StreamDelta
from actors.models._retry import RetryableError
from actors.models._sse import ServerSentEvent

__all__ = ["EventAssembler", "finish_reason", "usage_from"]

# Anthropic's stop reasons in the vocabulary of `ModelResponse.finish_reason`.
_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
}
# Error types that can arrive inside a 200 stream, with the status they have as replies.
_STREAM_ERROR_STATUS = {
    "overloaded_error": 529,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "request_too_large": 413,
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
}


def finish_reason(reason: Any) -> str | None:
    return None if reason is None else _FINISH.get(str(reason), str(reason))


def usage_from(usage: Usage, data: Any) -> Usage:
    """``usage`` updated with the counts in ``data`` (Anthropic's counts are running totals)."""
    if not isinstance(data, dict):
        return usage
    inputs = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    input_tokens = usage.input_tokens
    if any(data.get(field) is not None for field in inputs):
        input_tokens = sum(int(data.get(field) or 0) for field in inputs)
    output = data.get("output_tokens")
    read = data.get("cache_read_input_tokens")
    write = data.get("cache_creation_input_tokens")
    return Usage(
        requests=1,
        input_tokens=input_tokens,
        output_tokens=usage.output_tokens if output is None else int(output),
        cache_read_tokens=usage.cache_read_tokens if read is None else int(read),
        cache_write_tokens=usage.cache_write_tokens if write is None else int(write),
    )


class EventAssembler(StreamAssembler):
    """Joins a message stream: content blocks by index, usage, the stop reason."""

    def __init__(self, model_name: str) -> None:
        self._model_name = model_name
        self._text: list[str] = []
        # content block index -> [id, name, json pieces]; insertion order is call order.
        self._calls: dict[int, tuple[str, str, list[str]]] = {}
        self._usage = Usage(requests=1)
        self._stop_reason: str | None = None
        self._started = False
        self._done = False

    @property
    def done(self) -> bool:
        return self._done

    @property
    def complete(self) -> bool:
        return self._done or self._stop_reason is not None

    def feed(self, event: ServerSentEvent) -> Iterable[StreamDelta]:
        data = json.loads(event.data)
        kind = data.get("type", event.event)
        if kind == "message_start":
            message = data["message"]
            self._started = True
            self._model_name = str(message.get("model") or self._model_name)
            self._usage = usage_from(self._usage, message.get("usage"))
        elif kind == "content_block_start":
            block = data["content_block"]
            if block["type"] == "tool_use":
                index = int(data["index"])
                self._calls[index] = (str(block["id"]), str(block["name"]), [])
                return [
                    StreamDelta(
                        kind="tool_call",
                        index=list(self._calls).index(index),
                        tool_call_id=str(block["id"]),
                        tool_name=str(block["name"]),
                    )
                ]
            if block["type"] == "text" and block.get("text"):
                self._text.append(block["text"])
                return [StreamDelta(kind="text", text=block["text"])]
        elif kind == "content_block_delta":
            return self._delta(int(data["index"]), data["delta"])
        elif kind == "message_delta":
            self._stop_reason = finish_reason(data["delta"].get("stop_reason")) or self._stop_reason
            self._usage = usage_from(self._usage, data.get("usage"))
        elif kind == "message_stop":
            self._done = True
        elif kind == "error":
            _raise_stream_error(data.get("error") or {})
        return ()

    def _delta(self, index: int, delta: dict[str, Any]) -> list[StreamDelta]:
        if delta["type"] == "text_delta":
            self._text.append(delta["text"])
            return [StreamDelta(kind="text", text=delta["text"])]
        if delta["type"] == "input_json_delta":
            if index not in self._calls:
                raise UnexpectedModelResponse(f"input_json_delta for unknown block {index}")
            self._calls[index][2].append(delta["partial_json"])
            position = list(self._calls).index(index)
            return [StreamDelta(kind="tool_call", text=delta["partial_json"], index=position)]
        return []  # thinking and signature deltas are not kept

    def response(self) -> ModelResponse:
        if not self._started:
            raise UnexpectedModelResponse("the stream never sent message_start")
        calls = tuple(
            ToolCall(id=call_id, name=name, arguments=parse_arguments("".join(pieces)))
            for call_id, name, pieces in self._calls.values()
        )
        return ModelResponse(
            message=AssistantMessage(content="".join(self._text), tool_calls=calls),
            usage=self._usage,
            model_name=self._model_name,
            finish_reason=self._stop_reason,
        )


def _raise_stream_error(error: dict[str, Any]) -> None:
    kind = str(error.get("type") or "api_error")
    message = excerpt(str(error.get("message") or kind))
    status = _STREAM_ERROR_STATUS.get(kind, 500)
    failure = ModelHTTPError(
        f"{kind} inside the stream: {message}", status_code=status, body=message
    )
    if status in (429, 529) or status >= 500:
        raise RetryableError(failure)
    raise failure
