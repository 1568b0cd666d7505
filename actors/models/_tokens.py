"""Token counting: how many input tokens a request will cost, known before it is sent.

Every model can be asked: `count_tokens(model, request)` calls the model's own
``count_tokens(request)`` when it has one (a provider's local tokenizer, say), else the
estimate here: about four characters a token, plus a few tokens a message and for the tool
definitions. An estimate is calibrated by what the provider reports: `TokenCalibration` keeps,
per agent, the ratio of the input tokens a reply reported to the estimate of its request, and
scales the next estimates by it.

`context_window_of(model)` is the model's known window (its ``context_window`` attribute, or
the table of known model names here), or None.

Nothing here needs a tokenizer package: `tiktoken` is used when it is installed and its
encoding loads (an offline machine without its cached files falls back to the estimate).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from actors._logging import get_logger
from actors.context._messages import AssistantMessage, Message, ToolResultMessage
from actors.context._parts import content_size
from actors.models._model import ModelRequest, ToolDefinition

# `TokenCalibration` is public in `actors.models` (the agent loop keeps one per agent);
# `TokenCounting` is the providers' base for counting.
__all__ = [
    "CHARS_PER_TOKEN",
    "context_window_of",
    "count_tokens",
    "estimate_tokens",
    "known_context_window",
    "message_tokens",
    "tiktoken_counter",
    "tools_tokens",
]

_log = get_logger("actors.models")

CHARS_PER_TOKEN = 4
"""The estimate's rule of thumb: English text and JSON average about four characters a token."""

_PER_MESSAGE = 4  # role and separators
_PER_CALL = 8  # a tool call's id, name and framing


def message_tokens(message: Message) -> int:
    """The estimated tokens of one message."""
    content = message.content
    size = len(content) if type(content) is str else content_size(content)
    kind = type(message)
    if kind is AssistantMessage:
        for call in message.tool_calls:  # type: ignore[union-attr]
            size += len(call.name) + len(json.dumps(call.arguments, separators=(",", ":")))
            size += _PER_CALL * CHARS_PER_TOKEN
    elif kind is ToolResultMessage:
        size += len(message.tool_name)  # type: ignore[union-attr]
    return size // CHARS_PER_TOKEN + _PER_MESSAGE


def tools_tokens(tools: Sequence[ToolDefinition]) -> int:
    """The estimated tokens of a request's tool definitions."""
    size = 0
    for tool in tools:
        size += len(tool.name) + len(tool.description)
        size += len(json.dumps(tool.parameters, separators=(",", ":")))
    return size // CHARS_PER_TOKEN + _PER_MESSAGE * len(tools)


def estimate_tokens(request: ModelRequest) -> int:
    """The estimated input tokens of ``request``: its messages, its tools and its schema."""
    total = tools_tokens(request.tools)
    for message in request.messages:
        total += message_tokens(message)
    if request.output_schema is not None:
        total += len(json.dumps(request.output_schema)) // CHARS_PER_TOKEN
    return total


def count_tokens(model: Any, request: ModelRequest) -> int:
    """The input tokens ``request`` will cost on ``model``, counted before it is sent.

    The model's own ``count_tokens(request)`` when it has one (exact where the provider's
    tokenizer is at hand), else `estimate_tokens`. It must be quick and must not wait on I/O:
    an agent counts as it builds a request, on its own turn.
    """
    counter = getattr(model, "count_tokens", None)
    if counter is None:
        return estimate_tokens(request)
    return int(counter(request))


class TokenCalibration:
    """One agent's ratio of reported to estimated input tokens, applied to the next estimates.

    The latest request is the best guide (the transcript's mix of text and JSON changes
    slowly); the ratio is kept within 1/4 and 4, so one odd report cannot make an estimate
    absurd.
    """

    __slots__ = ("ratio",)

    def __init__(self, ratio: float = 1.0) -> None:
        self.ratio = ratio

    def observe(self, estimated: int, reported: int) -> None:
        """A reply reported ``reported`` input tokens for a request estimated at ``estimated``."""
        if estimated > 0 and reported > 0:
            self.ratio = min(4.0, max(0.25, reported / estimated))

    def apply(self, estimated: int) -> int:
        """``estimated``, scaled by what the provider reported before (rounded up)."""
        ratio = self.ratio
        if ratio == 1.0:
            return estimated
        return int(estimated * ratio) + 1


# Known windows, by model-name prefix (the longest prefix that matches wins). A model's
# ``context_window`` attribute, or an agent's ``context_window``, takes precedence.
_KNOWN_WINDOWS: dict[str, int] = {
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "claude-": 200_000,
}


def known_context_window(model_name: str) -> int | None:
    """The context window of a model known by name (``"gpt-4o"``, ``"claude-sonnet-4-5"``)."""
    name = model_name.rsplit(":", 1)[-1].rsplit("/", 1)[-1]
    best: tuple[int, int] | None = None
    for prefix, window in _KNOWN_WINDOWS.items():
        if name.startswith(prefix) and (best is None or len(prefix) > best[0]):
            best = (len(prefix), window)
    return best[1] if best else None


def context_window_of(model: Any) -> int | None:
    """``model``'s context window in tokens: its ``context_window``, or known by its name."""
    window = getattr(model, "context_window", None)
    if isinstance(window, int) and not isinstance(window, bool) and window > 0:
        return window
    name = getattr(model, "name", None)
    return known_context_window(name) if isinstance(name, str) else None


class TokenCounting:
    """What a model with a provider's name has for counting: its known window, an estimate."""

    _model_name: str

    @property
    def context_window(self) -> int | None:
        """The model's context window in tokens, when its name is a known one; else None."""
        return known_context_window(self._model_name)

    @property
    def counts_exactly(self) -> bool:
        """Whether `count_tokens` uses the model's own tokenizer (else it estimates)."""
        return False

    def count_tokens(self, request: ModelRequest) -> int:
        """The input tokens ``request`` will cost, counted before it is sent (an estimate)."""
        return estimate_tokens(request)


_ENCODINGS: dict[str, Callable[[str], int] | None] = {}


def tiktoken_counter(model_name: str) -> Callable[[str], int] | None:
    """A function counting the tokens of a text with tiktoken, or None.

    None when tiktoken is not installed or its encoding cannot be loaded (offline, without its
    cached files): the caller falls back to the estimate. Loaded once per process.
    """
    if model_name in _ENCODINGS:
        return _ENCODINGS[model_name]
    counter: Callable[[str], int] | None = None
    try:
        import tiktoken  # type: ignore[import-not-found]  # optional: not a dependency
    except ImportError:
        pass
    else:
        try:
            try:
                encoding = tiktoken.encoding_for_model(model_name)
            except KeyError:  # a name tiktoken does not know: the newest common encoding
                encoding = tiktoken.get_encoding("o200k_base")

            def counter(text: str) -> int:
                return len(encoding.encode(text, disallowed_special=()))
        except Exception as exc:  # no network for its files, or a broken install: estimate
            _log.info("tiktoken could not load; token counts are estimates", error=str(exc))
            counter = None
    _ENCODINGS[model_name] = counter
    return counter
