"""OpenAI Chat Completions, and every server that speaks it (vLLM, llama.cpp, Ollama, ...).

Wire shapes follow the OpenAI API reference for ``POST /chat/completions``: the request body,
the ``chat.completion`` object, and the ``chat.completion.chunk`` objects of a stream that
ends with ``data: [DONE]``.

Messages with images, audio and files: see `actors.models._openai_messages`.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

import httpx

from actors.context._messages import (
    AssistantMessage,
    ToolCall,
)
from actors.context._parts import TextPart
from actors.context._usage import Usage
from actors.exceptions import (
    ModelHTTPError,
    UnexpectedModelResponse,
    UserError,
)
from actors.models._accepts import OPENAI_ACCEPTS, Accepts
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
from actors.models._native import native_mode, native_schema, unwrap_text
from actors.models._openai_messages import openai_messages
from actors.models._pool import HTTPPool
from actors.models._retry import RetryableError, RetryPolicy
from actors.models._sse import ServerSentEvent
from actors.models._tokens import estimate_tokens, tiktoken_counter

__all__ = ["OpenAIChatModel"]

OPENAI_BASE_URL = "https://api.openai.com/v1"
_SAMPLING = ("temperature", "top_p", "seed", "stop")


class OpenAIChatModel(HTTPModel):
    """A model behind the OpenAI Chat Completions API, or any server compatible with it.

    Without ``base_url`` the model talks to OpenAI (or to ``OPENAI_BASE_URL`` when set) and
    needs a key: ``api_key``, else ``OPENAI_API_KEY``, read when a request is sent (so a model
    can be built before the key is set). With an explicit ``base_url`` only an explicit
    ``api_key`` is sent, and none is needed: an OpenAI key is never sent to a server that the
    environment did not name.

    Args:
        model_name: The model, as the server names it (``"gpt-4o-mini"``).
        base_url: The API root, up to and including ``/v1``.
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
        provider: The label in `name` (``"ollama"``, ``"openai-compatible"``, ...).
        max_tokens_field: The body field for ``settings["max_tokens"]``. Default:
            ``"max_completion_tokens"`` for api.openai.com (its reasoning models refuse the
            old field), ``"max_tokens"`` for other servers (many know only that one).
        accepts: What content the model takes (default `OPENAI_ACCEPTS`: PNG, JPEG, GIF
            and WebP images up to 20 MB, also by URL; wav and mp3 audio; PDFs up to 32 MB;
            text documents). A part outside it is refused before sending with
            `UnsupportedContentError`. Give a narrower one for a server that reads less (a
            text-only vLLM model: ``Accepts(media_types=())``).

    Example:
        >>> model = OpenAIChatModel("gpt-4o-mini")
        >>> model.name
        'openai:gpt-4o-mini'
    """

    provider: ClassVar[str] = "openai"
    _path: ClassVar[str] = "/chat/completions"
    default_accepts: ClassVar[Accepts] = OPENAI_ACCEPTS

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
        provider: str = "openai",
        max_tokens_field: str | None = None,
        accepts: Accepts | None = None,
    ) -> None:
        if base_url is None:
            url = os.environ.get("OPENAI_BASE_URL", "").strip() or OPENAI_BASE_URL
            keys = KeyResolver(api_key, "OPENAI_API_KEY", provider)
        else:
            url = base_url
            keys = KeyResolver(api_key, None, provider)
        super().__init__(
            model_name,
            base_url=url,
            keys=keys,
            http_client=http_client,
            timeout=timeout,
            pool=pool,
            retry=retry,
            settings=settings,
            label=provider,
            accepts=accepts,
        )
        if max_tokens_field is None:
            official = httpx.URL(self.base_url).host == "api.openai.com"
            max_tokens_field = "max_completion_tokens" if official else "max_tokens"
        self._max_tokens_field = max_tokens_field

    def _auth(self, key: ApiKey) -> httpx.Auth:
        return HeaderAuth("authorization", key, prefix="Bearer ")

    @property
    def counts_exactly(self) -> bool:
        """Whether tiktoken (optional) is installed and loads an encoding for this model."""
        return tiktoken_counter(self._model_name) is not None

    def count_tokens(self, request: ModelRequest) -> int:
        """The input tokens of ``request``: with tiktoken when it is at hand, else estimated."""
        counter = tiktoken_counter(self._model_name)
        if counter is None:
            return estimate_tokens(request)
        total = 3  # the reply's priming
        for message in request.messages:
            content = message.content
            if isinstance(content, str):
                total += 4 + counter(content)
            else:
                total += 4 + sum(
                    counter(part.text) if isinstance(part, TextPart) else part.tokens
                    for part in content
                )
            if isinstance(message, AssistantMessage):
                for call in message.tool_calls:
                    total += counter(call.name) + counter(json.dumps(call.arguments)) + 8
        if request.tools:
            total += counter(json.dumps([_tool(t) for t in request.tools]))
        return total

    def _body(self, request: ModelRequest, settings: ModelSettings, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model_name,
            "messages": openai_messages(request.messages, self.name),
        }
        native = native_mode(request, settings)
        if request.tools:
            body["tools"] = [_tool(tool, native == "tool") for tool in request.tools]
            if "tool_choice" in settings:
                body["tool_choice"] = _tool_choice(settings["tool_choice"], request.tools)
            elif native == "tool":
                body["tool_choice"] = "required"  # the answer comes through final_result
            if "parallel_tool_calls" in settings:
                body["parallel_tool_calls"] = settings["parallel_tool_calls"]
        if native == "text":
            assert request.output_schema is not None
            shaped = native_schema(request.output_schema)
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": FINAL_RESULT_TOOL,
                    "schema": shaped.schema,
                    "strict": shaped.strict,
                },
            }
        for name in _SAMPLING:
            if name in settings:
                body[name] = settings[name]  # type: ignore[literal-required]
        if "max_tokens" in settings:
            body[self._max_tokens_field] = settings["max_tokens"]
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        body.update(settings.get("extra_body", {}))
        return body

    def _parse(self, data: Any) -> ModelResponse:
        if isinstance(data, dict) and "choices" not in data and isinstance(data.get("error"), dict):
            raise UnexpectedModelResponse(
                f"{self.name} answered with an error: {excerpt(str(data['error'].get('message')))}"
            )
        choice = data["choices"][0]
        message = choice["message"]
        calls = [
            (call["id"], call["function"]["name"], call["function"].get("arguments") or "")
            for call in message.get("tool_calls") or ()
        ]
        content = _text(message.get("content")) or message.get("refusal") or ""
        return ModelResponse(
            message=_assistant(str(content), calls),
            usage=_usage(data.get("usage")),
            model_name=str(data.get("model") or self.model_name),
            finish_reason=choice.get("finish_reason"),
        )

    def _assembler(self) -> StreamAssembler:
        return _ChunkAssembler(self.model_name)

    def _finish(
        self, response: ModelResponse, request: ModelRequest, settings: ModelSettings
    ) -> ModelResponse:
        if native_mode(request, settings) != "text" or request.output_schema is None:
            return response
        if not native_schema(request.output_schema).wrapped:
            return response
        message = response.message
        content = unwrap_text(message.content, wrapped=True)
        return dataclasses.replace(
            response, message=message.model_copy(update={"content": content})
        )


def _tool(tool: ToolDefinition, native: bool = False) -> dict[str, Any]:
    function: dict[str, Any] = {
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
    }
    if native and tool.name == FINAL_RESULT_TOOL:
        shaped = native_schema(tool.parameters)
        function["parameters"] = shaped.schema
        function["strict"] = shaped.strict
    return {"type": "function", "function": function}


def _tool_choice(choice: str, tools: Sequence[ToolDefinition]) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    if not any(tool.name == choice for tool in tools):
        raise UserError(
            f"tool_choice {choice!r} is not 'auto', 'none', 'required' or a tool of this request"
        )
    return {"type": "function", "function": {"name": choice}}


def _assistant(content: str, calls: Iterable[tuple[str | None, str, str]]) -> AssistantMessage:
    tool_calls = tuple(
        ToolCall(id=call_id or f"call_{n}", name=name, arguments=parse_arguments(arguments))
        for n, (call_id, name, arguments) in enumerate(calls)
    )
    return AssistantMessage(content=content, tool_calls=tool_calls)


def _text(content: Any) -> str:
    """Message content as text: a string, or (some servers) a list of text parts."""
    if isinstance(content, list):
        return "".join(str(part.get("text") or "") for part in content if isinstance(part, dict))
    return str(content) if content else ""


def _usage(data: Any) -> Usage:
    if not isinstance(data, dict):
        return Usage(requests=1)
    details = data.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return Usage(
        requests=1,
        input_tokens=int(data.get("prompt_tokens") or 0),
        output_tokens=int(data.get("completion_tokens") or 0),
        cache_read_tokens=int(cached or 0),  # part of prompt_tokens
    )


class _ChunkAssembler(StreamAssembler):
    """Joins ``chat.completion.chunk`` objects: text pieces, and tool calls by their index."""

    def __init__(self, model_name: str) -> None:
        self._model_name = model_name
        self._text: list[str] = []
        # index -> [id, name, argument pieces], in the order the calls first appeared.
        self._calls: dict[int, tuple[list[str | None], list[str]]] = {}
        self._finish_reason: str | None = None
        self._usage = Usage(requests=1)
        self._done = False

    @property
    def done(self) -> bool:
        return self._done

    @property
    def complete(self) -> bool:
        return self._done or self._finish_reason is not None

    def feed(self, event: ServerSentEvent) -> Iterable[StreamDelta]:
        if event.data.strip() == "[DONE]":
            self._done = True
            return ()
        chunk = json.loads(event.data)
        if not isinstance(chunk, dict):
            raise UnexpectedModelResponse(f"a stream chunk is not an object: {excerpt(event.data)}")
        if isinstance(chunk.get("error"), dict):
            _raise_stream_error(chunk["error"])
        self._model_name = str(chunk.get("model") or self._model_name)
        if chunk.get("usage"):
            self._usage = _usage(chunk["usage"])
        deltas: list[StreamDelta] = []
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            text = delta.get("content") or delta.get("refusal")
            if text:
                self._text.append(text)
                deltas.append(StreamDelta(kind="text", text=text))
            for piece in delta.get("tool_calls") or ():
                deltas.append(self._tool_piece(piece))
            if choice.get("finish_reason"):
                self._finish_reason = choice["finish_reason"]
        return deltas

    def _tool_piece(self, piece: dict[str, Any]) -> StreamDelta:
        index = int(piece.get("index", len(self._calls)))
        function = piece.get("function") or {}
        arguments = function.get("arguments") or ""
        if index not in self._calls:
            self._calls[index] = ([piece.get("id"), function.get("name") or ""], [])
            head, pieces = self._calls[index]
            pieces.append(arguments)
            return StreamDelta(
                kind="tool_call",
                text=arguments,
                index=list(self._calls).index(index),
                tool_call_id=head[0],
                tool_name=head[1],
            )
        head, pieces = self._calls[index]
        # Some servers repeat the id and name on later pieces; the first ones stand.
        head[0] = head[0] or piece.get("id")
        head[1] = head[1] or function.get("name") or ""
        pieces.append(arguments)
        return StreamDelta(kind="tool_call", text=arguments, index=list(self._calls).index(index))

    def response(self) -> ModelResponse:
        # The order the calls first appeared, which is also the order of the deltas' index.
        calls = [(head[0], str(head[1]), "".join(pieces)) for head, pieces in self._calls.values()]
        return ModelResponse(
            message=_assistant("".join(self._text), calls),
            usage=self._usage,
            model_name=self._model_name,
            finish_reason=self._finish_reason,
        )


def _raise_stream_error(error: dict[str, Any]) -> None:
    """An error object inside a stream: a 5xx-style failure that may pass, unless it says not."""
    message = excerpt(str(error.get("message") or error))
    code = error.get("code")
    status = code if isinstance(code, int) else 500
    failure = ModelHTTPError(
        f"error inside the stream: {message}", status_code=status, body=message
    )
    if status == 429 or status >= 500:
        raise RetryableError(failure)
    raise failure
