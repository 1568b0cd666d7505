"""Anthropic Messages API.

Wire shapes follow Anthropic's API reference for ``POST /v1/messages`` (request body, the
``message`` object, error objects) and its streaming guide (events ``message_start``,
``content_block_start`` / ``_delta`` / ``_stop``, ``message_delta``, ``message_stop``,
``ping``, ``error``).

Parts of a user message become content blocks: ``image`` (a base64 or URL source), ``document``
(a PDF as a base64 or URL source, a text document as a text source) and ``text``. A tool
result holds text and image blocks; its documents follow the step's tool results in the same
user turn (the API wants tool results first in a turn). Claude reads no audio.

Prompt caching: by default (``cache="prompt"``) the system prompt and the last tool definition
carry ``cache_control: {"type": "ephemeral"}``, so an agent's later requests read its prompt
and tools from Anthropic's cache; ``cache="conversation"`` marks the last message too.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any, ClassVar, Literal, TypeAlias

import httpx

from actors.context._messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
)
from actors.context._usage import Usage
from actors.exceptions import (
    UnexpectedModelResponse,
    UserError,
)
from actors.models._accepts import ANTHROPIC_ACCEPTS, Accepts
from actors.models._anthropic_stream import EventAssembler, finish_reason, usage_from
from actors.models._anthropic_turns import anthropic_turns
from actors.models._arguments import parse_arguments
from actors.models._auth import ApiKey, ApiKeySource, HeaderAuth, KeyResolver
from actors.models._base import HTTPModel, StreamAssembler
from actors.models._errors import excerpt
from actors.models._model import (
    FINAL_RESULT_TOOL,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ToolDefinition,
)
from actors.models._native import native_mode, native_schema, text_answer
from actors.models._pool import HTTPPool
from actors.models._retry import RetryPolicy

__all__ = ["AnthropicModel", "CacheBreakpoints"]

CacheBreakpoints: TypeAlias = Literal["prompt", "conversation"] | None
"""Where `AnthropicModel` marks prompt-cache breakpoints: ``"prompt"`` (the system prompt and
the last tool), ``"conversation"`` (those and the last message), or None (nowhere)."""

_EPHEMERAL = {"type": "ephemeral"}

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096


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
    counts cached input too; ``cache_read_tokens`` and ``cache_write_tokens`` say how much of
    it was read from the prompt cache and written to it. Thinking blocks are not kept.

    Messages may hold images (PNG, JPEG, GIF, WebP; 5 MB each), PDFs and text documents;
    a tool result holds text and images (its documents follow it in the same turn). Audio,
    and anything past a 32 MB request, is refused before sending (`UnsupportedContentError`).

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
        cache: Where prompt-cache breakpoints go: ``"prompt"`` (the default) marks the
            system prompt and the last tool definition, so every request of an agent reads
            them from the cache once they are written (Anthropic caches a prefix of at least
            1,024 tokens, 2,048 on Haiku; a shorter one is simply not cached);
            ``"conversation"`` marks the last message as well, so the next step reads the
            whole transcript so far from the cache (cache writes cost 1.25 times the input
            price, reads a tenth); None marks nothing.
        accepts: What content the model takes (default `ANTHROPIC_ACCEPTS`).

    Example:
        >>> AnthropicModel("claude-sonnet-4-5").name
        'anthropic:claude-sonnet-4-5'
    """

    provider: ClassVar[str] = "anthropic"
    _path: ClassVar[str] = "/v1/messages"
    default_accepts: ClassVar[Accepts] = ANTHROPIC_ACCEPTS

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
        cache: CacheBreakpoints = "prompt",
        accepts: Accepts | None = None,
    ) -> None:
        if cache not in ("prompt", "conversation", None):
            raise UserError(f"cache must be 'prompt', 'conversation' or None, got {cache!r}")
        self._cache: CacheBreakpoints = cache
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
            accepts=accepts,
        )

    def _auth(self, key: ApiKey) -> httpx.Auth:
        return HeaderAuth("x-api-key", key)

    def _headers(self) -> dict[str, str]:
        return {"anthropic-version": ANTHROPIC_VERSION}

    @property
    def cache(self) -> CacheBreakpoints:
        """Where prompt-cache breakpoints go (see the ``cache`` argument)."""
        return self._cache

    def _body(self, request: ModelRequest, settings: ModelSettings, stream: bool) -> dict[str, Any]:
        system = [m.content for m in request.messages if isinstance(m, SystemMessage)]
        body: dict[str, Any] = {
            "model": self.model_name,
            "max_tokens": settings.get("max_tokens", DEFAULT_MAX_TOKENS),
            "messages": anthropic_turns(request.messages, self.name),
        }
        if system:
            prompt = "\n\n".join(system)
            if self._cache is None:
                body["system"] = prompt
            else:
                body["system"] = [{"type": "text", "text": prompt, "cache_control": _EPHEMERAL}]
        if self._cache == "conversation" and body["messages"]:
            last = body["messages"][-1]["content"][-1]
            body["messages"][-1]["content"][-1] = {**last, "cache_control": _EPHEMERAL}
        native = native_mode(request, settings)
        tools = list(request.tools)
        if native == "text":
            # The answer is the input of a tool the model must call (see `_finish`).
            assert request.output_schema is not None
            shaped = native_schema(request.output_schema).schema
            tools = [ToolDefinition(FINAL_RESULT_TOOL, "Give the final answer.", shaped)]
        if tools:
            body["tools"] = [_tool(tool) for tool in tools]
            if self._cache is not None:
                body["tools"][-1]["cache_control"] = _EPHEMERAL
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
            usage=usage_from(Usage(requests=1), data.get("usage")),
            model_name=str(data.get("model") or self.model_name),
            finish_reason=finish_reason(data.get("stop_reason")),
        )

    def _assembler(self) -> StreamAssembler:
        return EventAssembler(self.model_name)

    def _finish(
        self, response: ModelResponse, request: ModelRequest, settings: ModelSettings
    ) -> ModelResponse:
        if native_mode(request, settings) != "text" or request.output_schema is None:
            return response
        return text_answer(response, native_schema(request.output_schema).wrapped)


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
