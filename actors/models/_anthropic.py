"""Anthropic Messages API.

Wire shapes follow Anthropic's API reference for ``POST /v1/messages`` (request body, the
``message`` object, error objects) and its streaming guide (events ``message_start``,
``content_block_start`` / ``_delta`` / ``_stop``, ``message_delta``, ``message_stop``,
``ping``, ``error``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

import httpx

from actors.context._messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
)
from actors.context._usage import Usage
from actors.exceptions import ModelHTTPError, UnexpectedModelResponse, UserError
from actors.models._arguments import parse_arguments
from actors.models._auth import ApiKey, ApiKeySource, HeaderAuth, KeyResolver
from actors.models._base import HTTPModel, StreamAssembler
from actors.models._errors import excerpt
from actors.models._model import (
    FINAL_RESULT_TOOL,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    StreamDelta,
    ToolDefinition,
)
from actors.models._native import native_mode, native_schema, text_answer
from actors.models._pool import HTTPPool
from actors.models._retry import RetryableError, RetryPolicy
from actors.models._sse import ServerSentEvent

__all__ = ["AnthropicModel"]

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096

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


class AnthropicModel(HTTPModel):
    """A Claude model behind Anthropic's Messages API.

    Without ``base_url`` the model talks to Anthropic (or ``ANTHROPIC_BASE_URL`` when set)
    and needs a key: ``api_key``, else ``ANTHROPIC_API_KEY``, read when a request is sent.
    With an explicit ``base_url`` only an explicit ``api_key`` is sent, and none is needed.

    System messages become the top-level ``system`` prompt (joined, in order); tool results
    that follow one another go into one user message, as the API requires. The API needs
    ``max_tokens``; without ``settings["max_tokens"]`` it is `DEFAULT_MAX_TOKENS` (4096).
    ``finish_reason`` uses the common vocabulary: ``"stop"``, ``"tool_calls"``,
    ``"length"``, ``"content_filter"`` (other stop reasons pass through). ``input_tokens``
    counts cached input too. Thinking blocks are not kept.

    Args:
        model_name: The model, as Anthropic names it (``"claude-sonnet-4-5"``).
        base_url: The API root, without ``/v1``.
        api_key: The key, or a function returning it (called on every request).
        http_client: Your own client (proxies, custom transports); you close it. Without
            one, the model shares connections with every model that talks to the same
            server (see ``pool``).
        timeout: Transport timeouts of the model's requests. Default: connect 10 s,
            everything else 300 s (the pool timeout bounds the wait for a free connection).
            ``settings["timeout"]`` overrides it for one request.
        pool: How connections to the server are shared (default `HTTPPool()`: up to 1,000
            requests in flight per server, more wait their turn). Ignored with
            ``http_client``.
        retry: When failed requests are retried (default `RetryPolicy()`).
        settings: Defaults for every request; a request's own settings win.

    Example:
        >>> AnthropicModel("claude-sonnet-4-5").name
        'anthropic:claude-sonnet-4-5'
    """

    provider: ClassVar[str] = "anthropic"
    _path: ClassVar[str] = "/v1/messages"

    def __init__(
        self,
        model_name: str,
        *,
        base_url: str | None = None,
        api_key: ApiKeySource = None,
        http_client: httpx.AsyncClient | None = None,
        timeout: float | httpx.Timeout | None = None,
        pool: HTTPPool | None = None,
        retry: RetryPolicy | None = None,
        settings: ModelSettings | None = None,
    ) -> None:
        if base_url is None:
            url = os.environ.get("ANTHROPIC_BASE_URL", "").strip() or ANTHROPIC_BASE_URL
            keys = KeyResolver(api_key, "ANTHROPIC_API_KEY", "anthropic")
        else:
            url = base_url
            keys = KeyResolver(api_key, None, "anthropic")
        super().__init__(
            model_name,
            base_url=url,
            keys=keys,
            http_client=http_client,
            timeout=timeout,
            pool=pool,
            retry=retry,
            settings=settings,
            label="anthropic",
        )

    def _auth(self, key: ApiKey) -> httpx.Auth:
        return HeaderAuth("x-api-key", key)

    def _headers(self) -> dict[str, str]:
        return {"anthropic-version": ANTHROPIC_VERSION}

    def _body(self, request: ModelRequest, settings: ModelSettings, stream: bool) -> dict[str, Any]:
        system = [m.content for m in request.messages if isinstance(m, SystemMessage)]
        body: dict[str, Any] = {
            "model": self.model_name,
            "max_tokens": settings.get("max_tokens", DEFAULT_MAX_TOKENS),
            "messages": _messages(request.messages),
        }
        if system:
            body["system"] = "\n\n".join(system)
        native = native_mode(request, settings)
        tools = list(request.tools)
        if native == "text":
            # The answer is the input of a tool the model must call (see `_finish`).
            assert request.output_schema is not None
            shaped = native_schema(request.output_schema).schema
            tools = [ToolDefinition(FINAL_RESULT_TOOL, "Give the final answer.", shaped)]
        if tools:
            body["tools"] = [_tool(tool) for tool in tools]
            choice: dict[str, Any]
            if native == "text":
                choice = {"type": "tool", "name": FINAL_RESULT_TOOL}
            else:
                choice = _tool_choice(settings.get("tool_choice"), tools)
            if native == "tool" and not choice:
                choice = {"type": "any"}  # some tool, final_result included: never bare text
            if settings.get("parallel_tool_calls") is False and choice.get("type") != "none":
                choice = {"type": "auto", **choice, "disable_parallel_tool_use": True}
            if choice:
                body["tool_choice"] = choice
        for name in ("temperature", "top_p"):
            if name in settings:
                body[name] = settings[name]
        if "stop" in settings:
            body["stop_sequences"] = settings["stop"]
        if stream:
            body["stream"] = True
        body.update(settings.get("extra_body", {}))
        return body

    def _parse(self, data: Any) -> ModelResponse:
        if data.get("type") == "error":
            error = data.get("error") or {}
            raise UnexpectedModelResponse(
                f"{self.name} answered with an error: {excerpt(str(error.get('message')))}"
            )
        text: list[str] = []
        calls: list[ToolCall] = []
        for block in data["content"]:
            if block["type"] == "text":
                text.append(block["text"])
            elif block["type"] == "tool_use":
                arguments = block.get("input")
                if not isinstance(arguments, dict):
                    arguments = parse_arguments(json.dumps(arguments))
                calls.append(ToolCall(id=block["id"], name=block["name"], arguments=arguments))
        return ModelResponse(
            message=AssistantMessage(content="".join(text), tool_calls=tuple(calls)),
            usage=_usage(Usage(requests=1), data.get("usage")),
            model_name=str(data.get("model") or self.model_name),
            finish_reason=_finish(data.get("stop_reason")),
        )

    def _assembler(self) -> StreamAssembler:
        return _EventAssembler(self.model_name)

    def _finish(
        self, response: ModelResponse, request: ModelRequest, settings: ModelSettings
    ) -> ModelResponse:
        if native_mode(request, settings) != "text" or request.output_schema is None:
            return response
        return text_answer(response, native_schema(request.output_schema).wrapped)


def _messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The transcript as alternating turns of content blocks (system messages left out)."""
    turns: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            continue
        role, blocks = _blocks(message)
        if not blocks:
            continue
        # Consecutive messages of one role share a turn: tool results of one step go
        # together, and a user message after them joins their turn (results first).
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return turns


def _blocks(message: Message) -> tuple[str, list[dict[str, Any]]]:
    if isinstance(message, ToolResultMessage):
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id,
            "content": message.content,
        }
        if message.is_error:
            block["is_error"] = True
        return "user", [block]
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
    return "user", [{"type": "text", "text": message.content}] if message.content else []


def _tool(tool: ToolDefinition) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}


def _tool_choice(choice: str | None, tools: Sequence[ToolDefinition]) -> dict[str, Any]:
    if choice is None:
        return {}
    if choice in ("auto", "none"):
        return {"type": choice}
    if choice == "required":
        return {"type": "any"}
    if not any(tool.name == choice for tool in tools):
        raise UserError(
            f"tool_choice {choice!r} is not 'auto', 'none', 'required' or a tool of this request"
        )
    return {"type": "tool", "name": choice}


def _finish(reason: Any) -> str | None:
    return None if reason is None else _FINISH.get(str(reason), str(reason))


def _usage(usage: Usage, data: Any) -> Usage:
    """``usage`` updated with the counts in ``data`` (Anthropic's counts are running totals)."""
    if not isinstance(data, dict):
        return usage
    inputs = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    input_tokens = usage.input_tokens
    if any(data.get(field) is not None for field in inputs):
        input_tokens = sum(int(data.get(field) or 0) for field in inputs)
    output = data.get("output_tokens")
    return Usage(
        requests=1,
        input_tokens=input_tokens,
        output_tokens=usage.output_tokens if output is None else int(output),
    )


class _EventAssembler(StreamAssembler):
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
            self._usage = _usage(self._usage, message.get("usage"))
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
            self._stop_reason = _finish(data["delta"].get("stop_reason")) or self._stop_reason
            self._usage = _usage(self._usage, data.get("usage"))
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
