"""The `Model` protocol: what an agent sends a model, what it gets back, and test switches."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

from actors.context._cancel import CancellationToken
from actors.context._messages import AssistantMessage, Message
from actors.context._quick_init import quick_init
from actors.context._usage import Usage
from actors.exceptions import ModelRequestsDisabled

__all__ = [
    "FINAL_RESULT_TOOL",
    "InlineModel",
    "Model",
    "ModelFallback",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "StreamDelta",
    "ToolDefinition",
    "allow_model_requests",
    "check_model_requests_allowed",
    "model_requests_allowed",
]


FINAL_RESULT_TOOL = "final_result"
"""The name of the tool through which a tools agent gives a structured final answer."""


class ModelSettings(TypedDict, total=False):
    """Settings passed to the model with each request. Providers ignore what they lack.

    ``tool_choice`` is ``"auto"``, ``"none"``, ``"required"`` or the name of one tool.

    ``native_output`` (off by default) asks the provider to enforce an agent's output type
    itself: OpenAI-style servers get ``response_format`` (a strict JSON schema when the type
    allows it) and, for a tools agent, a strict ``final_result`` tool and
    ``tool_choice="required"``; Anthropic is forced to call the ``final_result`` tool (any
    tool, for a tools agent). Set it on the model (``settings=``) when its server supports
    it, or on an agent's ``model_settings``; some OpenAI-compatible servers refuse it.
    """

    temperature: float
    max_tokens: int
    top_p: float
    seed: int
    stop: list[str]
    tool_choice: str
    parallel_tool_calls: bool
    stream: bool
    timeout: float
    extra_body: dict[str, Any]
    native_output: bool


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A tool as the model sees it: a name, a description, a JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class StreamDelta:
    """A piece of a reply that is still streaming in.

    Attributes:
        kind: ``"text"`` for content, ``"tool_call"`` for a piece of a tool call.
        text: The new text (for ``"text"``), or the new piece of the arguments' JSON.
        index: Which tool call of the reply the piece belongs to.
        tool_call_id: The call's id, on the first piece of a call.
        tool_name: The tool's name, on the first piece of a call.
    """

    kind: Literal["text", "tool_call"]
    text: str = ""
    index: int = 0
    tool_call_id: str | None = None
    tool_name: str | None = None


@quick_init
@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Everything a model needs for one request.

    Attributes:
        messages: The transcript, as the model should see it.
        tools: The tools the model may call.
        settings: Sampling and transport settings.
        cancellation: Set when the run is cancelled: a model closes its request in flight.
        on_delta: Called with each `StreamDelta` as a streamed reply arrives (or None).
        agent_id: The agent asking (for logs and for test models that script per agent).
        output_schema: When the agent wants its final answer as JSON text (an output type and
            no tools), the answer's JSON schema; providers may use it for structured output.
    """

    messages: Sequence[Message]
    tools: Sequence[ToolDefinition] = ()
    settings: ModelSettings = field(default_factory=lambda: ModelSettings())
    cancellation: CancellationToken = field(default_factory=CancellationToken)
    on_delta: Callable[[StreamDelta], None] | None = None
    agent_id: str = ""
    output_schema: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ModelFallback:
    """One switch of a `actors.models.FallbackModel` to its next model, for the agent's log.

    Attributes:
        model: The name of the model that failed.
        error: The type of its error (``"ModelHTTPError"``, ``"ModelTimeoutError"``, ...).
        message: The error's message, cut short (providers mask keys before this point).
        next_model: The name of the model tried next.
    """

    model: str
    error: str
    message: str
    next_model: str

    @classmethod
    def of(cls, model: str, error: BaseException, next_model: str) -> ModelFallback:
        """The switch away from ``model`` after ``error`` (its message cut to 200 characters)."""
        message = str(error)
        if len(message) > 200:
            message = message[:199] + "…"
        return cls(model, type(error).__name__, message, next_model)

    def to_json(self) -> dict[str, str]:
        """The data of the ``model_fallback`` event the agent logs."""
        return {
            "model": self.model,
            "error": self.error,
            "message": self.message,
            "next_model": self.next_model,
        }


@quick_init
@dataclass(frozen=True, slots=True)
class ModelResponse:
    """A model's complete reply.

    Attributes:
        message: The assistant message (text, tool calls, or both).
        usage: What the request cost (``requests`` is usually 1).
        model_name: The model that answered, as the provider names it.
        finish_reason: Why the model stopped (``"stop"``, ``"tool_calls"``, ``"length"``, ...).
        fallbacks: The switches a `actors.models.FallbackModel` made before this reply, in
            order; the agent logs each as a ``model_fallback`` event.
    """

    message: AssistantMessage
    usage: Usage = field(default_factory=lambda: Usage(requests=1))
    model_name: str = ""
    finish_reason: str | None = None
    fallbacks: tuple[ModelFallback, ...] = ()


@runtime_checkable
class Model(Protocol):
    """What the agent loop needs of a model: one async request at a time, many concurrently.

    Implementations must not raise anything but `actors.exceptions.ModelError` subclasses for
    provider failures, and must honour ``request.cancellation``.
    """

    @property
    def name(self) -> str:
        """The model's name (as logged in ``request_header`` events)."""
        ...

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Send ``request`` and return the complete reply."""
        ...


@runtime_checkable
class InlineModel(Protocol):
    """A model that can answer at once, without I/O or waiting (test and simulation models).

    The runtime calls `respond_inline` on the agent's own thread, saving the trip through the
    event loop; None means "not this time" and the runtime awaits `Model.request` instead. It
    must never block: an agent's thread serves its mailbox.
    """

    def respond_inline(self, request: ModelRequest) -> ModelResponse | None:
        """The reply, computed now, or None to be asked through `Model.request`."""
        ...


_ENV_SWITCH = "ACTORS_ALLOW_MODEL_REQUESTS"
_allowed: bool | None = None


def model_requests_allowed() -> bool:
    """Whether network-backed models may send requests.

    True unless switched off by `allow_model_requests(False)` or by the environment variable
    ``ACTORS_ALLOW_MODEL_REQUESTS=0`` (for test suites). The in-process test models never check.
    """
    if _allowed is not None:
        return _allowed
    return os.environ.get(_ENV_SWITCH, "1").strip().lower() not in {"0", "false", "no", "off"}


def check_model_requests_allowed(model_name: str) -> None:
    """Raise `ModelRequestsDisabled` when real model requests are switched off."""
    if not model_requests_allowed():
        raise ModelRequestsDisabled(
            f"model {model_name!r} would make a real request, but model requests are switched off "
            f"(allow_model_requests(False) or {_ENV_SWITCH}=0); use actors.testing's models"
        )


@contextmanager
def allow_model_requests(allowed: bool) -> Iterator[None]:
    """Switch real model requests on or off for the duration of a ``with`` block.

    Example:
        >>> with allow_model_requests(False):
        ...     model_requests_allowed()
        False
    """
    global _allowed
    previous, _allowed = _allowed, allowed
    try:
        yield
    finally:
        _allowed = previous
