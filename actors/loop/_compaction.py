"""Compaction: an agent summarises the oldest part of its transcript before it outgrows its window.

Before each model request an agent with a `Compaction` counts the request's tokens (see
`actors.models._tokens`). Past ``at`` of its context window it plans a compaction: the oldest
messages, except the leading system message, pinned messages and the last turns, with a tool
call and its results always on the same side. The summary is an effect like any model request
(a `CallModel` whose step is negative, so every host runs it as it runs the others): the
agent's mailbox stays open meanwhile, and steering, peer messages and a cancel are taken.
The reply is logged as a ``compacted`` event that shadows the range with the summary, like a
``replace``: the log keeps every message. A summarizer that fails gives way to a trim (the
range shadowed by a note saying what was dropped), logged too. A request is never sent over the
window: what cannot be made to fit ends the run with `ContextWindowExceeded`. A provider's
"context too long" refusal compacts and tries the step once more.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from actors.context._messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
)
from actors.context._parts import describe_content
from actors.exceptions import (
    AgentDefinitionError,
    ContextTooLongError,
    ModelFallbackError,
)
from actors.models._model import Model

# How a compaction is planned is in `_compactor`; how the loop runs it, in `_compacting`.
__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "MAX_ROUNDS",
    "SUMMARY_PREFIX",
    "TRIMMED",
    "Compaction",
    "is_context_too_long",
    "render_transcript",
]

DEFAULT_SUMMARY_PROMPT = (
    "You compact the transcript of an assistant's conversation. Write a summary that lets the "
    "assistant carry on as if it had read everything: the user's goals and preferences, facts "
    "and decisions, names, numbers and identifiers, what tools were called and what they "
    "returned, what is done and what is still open. Be specific and brief; write it as notes, "
    "not as a conversation. An earlier summary in the transcript is part of what you summarise."
)
"""The summarizer's instructions when none are given."""

SUMMARY_PREFIX = "[Summary of the earlier conversation]\n"
"""What starts the message that stands in for a summarised range."""

TRIMMED = (
    "[{count} earlier messages were removed to fit the context window; they could not be "
    "summarised ({reason}).]"
)

MAX_ROUNDS = 4  # compactions before one request: past it, the request cannot be made to fit


class SummarizerAgent(Protocol):
    """An `Agent` as a summarizer: told by its shape (this module sits below the spec)."""

    @property
    def name(self) -> str:
        """The spec's name."""

    @property
    def system_prompt(self) -> Any:
        """Its system prompt."""

    @property
    def tools(self) -> Any:
        """Its tools."""

    @property
    def model(self) -> Any:
        """Its model (a `Model`, a name, or None)."""


@dataclass(frozen=True, slots=True)
class Compaction:
    """How an agent keeps its transcript within its model's context window.

    Give it to an agent (``Agent(compaction=Compaction())``): before a request would pass
    ``at`` of the window (``Agent(context_window=...)``, or the model's known one), the agent
    summarises its oldest messages and logs a ``compacted`` event that shadows them with the
    summary. The log keeps every message.

    Attributes:
        at: The share of the window at which to compact (0 < at <= 1).
        keep_last_turns: The turns (a user message and what follows it) that always stay in
            view; fewer are kept only when these alone would not fit.
        summarizer: Who writes the summary: a `Model`, an `Agent` (its model, with its
            ``system_prompt`` or string ``instructions`` as the summarizer's instructions), a
            model name such as ``"openai:gpt-4o-mini"``, or None for the agent's own model.
        prompt: The summarizer's instructions when ``summarizer`` brings none.
        pin_key: A metadata key whose list pins messages too: event seqs (ints) or tool call
            ids (strings, pinning the call with its results).
        summary_max_tokens: ``max_tokens`` for the summarizer's reply (None: the model's).
    """

    at: float = 0.8
    keep_last_turns: int = 4
    summarizer: Model | SummarizerAgent | str | None = None
    prompt: str = DEFAULT_SUMMARY_PROMPT
    pin_key: str = "pinned"
    summary_max_tokens: int | None = 2_000

    def __post_init__(self) -> None:
        at = self.at
        if isinstance(at, bool) or not isinstance(at, int | float) or not 0 < at <= 1:
            raise AgentDefinitionError(
                f"Compaction(at=...) is a share of the window in (0, 1], got {at!r}"
            )
        turns = self.keep_last_turns
        if isinstance(turns, bool) or not isinstance(turns, int) or turns < 1:
            raise AgentDefinitionError(
                f"Compaction(keep_last_turns=...) must be a positive int, got {turns!r}"
            )
        if not isinstance(self.prompt, str) or not self.prompt.strip():
            raise AgentDefinitionError("Compaction(prompt=...) must be a non-empty string")
        if not isinstance(self.pin_key, str) or not self.pin_key:
            raise AgentDefinitionError("Compaction(pin_key=...) must be a non-empty string")
        limit = self.summary_max_tokens
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 1
        ):
            raise AgentDefinitionError(
                f"Compaction(summary_max_tokens=...) must be a positive int or None, got {limit!r}"
            )
        summarizer = self.summarizer
        if isinstance(summarizer, str):
            from actors.models import infer_model

            object.__setattr__(self, "summarizer", infer_model(summarizer))
        elif (
            summarizer is not None
            and not callable(getattr(summarizer, "request", None))
            # An Agent is told by its shape: this module sits below the spec that holds it.
            and not all(hasattr(summarizer, a) for a in ("model", "system_prompt", "tools"))
        ):
            raise AgentDefinitionError(
                "Compaction(summarizer=...) is a Model, an Agent, a model name or None, "
                f"got {type(summarizer).__name__}"
            )


def is_context_too_long(error: BaseException | None) -> bool:
    """Whether a model's error says the request was more than its context window."""
    if isinstance(error, ContextTooLongError):
        return True
    if isinstance(error, ModelFallbackError):
        return any(isinstance(e, ContextTooLongError) for _, e in error.failures)
    return False


def render_transcript(messages: Sequence[Message], budget: int | None = None) -> str:
    """The messages as plain text for the summarizer (tool calls and results included).

    With ``budget`` (characters), each message's text is cut so the whole fits.
    """
    parts: list[str] = []
    cut = None if budget is None or not messages else max(200, budget // len(messages))
    for message in messages:
        kind = type(message)
        if kind is AssistantMessage:
            reply: AssistantMessage = message  # type: ignore[assignment]
            text = f"Assistant: {reply.content}" if reply.content else "Assistant:"
            for call in reply.tool_calls:
                arguments = json.dumps(call.arguments, ensure_ascii=False)
                text += f"\n  called {call.name}({arguments}) [id {call.id}]"
        elif kind is ToolResultMessage:
            result: ToolResultMessage = message  # type: ignore[assignment]
            status = "error" if result.is_error else "result"
            shown = describe_content(result.content)
            text = f"Tool {result.tool_name} {status} [id {result.tool_call_id}]: {shown}"
        elif kind is SystemMessage:
            text = f"System: {message.content}"
        else:
            text = f"User: {describe_content(message.content)}"
        if cut is not None and len(text) > cut:
            text = text[: cut - 1] + "…"
        parts.append(text)
    return "\n\n".join(parts)
