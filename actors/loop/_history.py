"""History processors: what the model is shown of the transcript, request by request.

A processor is a quick, pure function of the `RunContext` and the messages the model would
see; it returns the messages to send instead. It shapes one request and nothing else: the
transcript, the log and the run's result keep every message (a view for the request, not an
edit of the history), so a processor can be changed or removed later and the whole history is
still there, and a replayed log gives the same requests. Processors run on the agent's turn,
as the request is built, so they must not block: work that waits (summarising with a model)
belongs in a tool or between runs, its result kept in the metadata for a processor to use.
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
from actors.context._run_context import RunContext
from actors.exceptions import RunFailedError, UserError
from actors.loop._agent import HistoryProcessor

__all__ = ["HistoryProcessor", "apply_history_processors", "keep_last_turns"]


_MESSAGE_TYPES = (SystemMessage, UserMessage, AssistantMessage, ToolResultMessage)


def keep_last_turns(n: int) -> HistoryProcessor:
    """A history processor that shows the model the leading system message and the last turns.

    A turn begins at a user message, and holds everything up to the next one, so a tool call
    and its result always stay together. Steering messages and the notes that send a final
    answer back are user messages too, and begin turns: with ``n`` of 2 or more the run's own
    question stays in view along with them. A transcript with fewer turns is sent whole.

    Args:
        n: How many turns to keep (at least 1).

    Example:
        >>> from actors import Agent, UserMessage, AssistantMessage
        >>> trim = keep_last_turns(1)
        >>> shown = trim(None, [UserMessage(content="a"), AssistantMessage(content="b"),
        ...                     UserMessage(content="c")])
        >>> [m.content for m in shown]
        ['c']
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise UserError(f"keep_last_turns needs a positive number of turns, got {n!r}")

    def keep_last_turns(ctx: RunContext[Any], messages: list[Message]) -> list[Message]:
        head = 1 if messages and isinstance(messages[0], SystemMessage) else 0
        starts = _turn_starts(messages, head, n)
        for start in starts:
            if _self_contained(messages, start):
                if start <= head:
                    return messages
                return messages[:head] + messages[start:]
        return messages

    return keep_last_turns


def _turn_starts(messages: list[Message], head: int, n: int) -> list[int]:
    """Where the last ``n`` turns begin, then earlier turn starts, latest first (and ``head``)."""
    starts: list[int] = []
    seen = 0
    for index in range(len(messages) - 1, head - 1, -1):
        if isinstance(messages[index], UserMessage):
            seen += 1
            if seen >= n:
                starts.append(index)
    starts.append(head)
    return starts


def _self_contained(messages: list[Message], start: int) -> bool:
    """Whether every tool result from ``start`` on answers a call made from ``start`` on."""
    calls: set[str] = set()
    for message in messages[start:]:
        if isinstance(message, AssistantMessage):
            calls.update(call.id for call in message.tool_calls)
        elif isinstance(message, ToolResultMessage) and message.tool_call_id not in calls:
            return False
    return True


def apply_history_processors(
    processors: Sequence[HistoryProcessor],
    ctx: RunContext[Any],
    messages: Sequence[Message],
) -> list[Message]:
    """Run ``processors`` in turn over ``messages``; what the model is to be sent.

    Raises:
        RunFailedError: a processor raised (its error is the cause), or returned something the
            model cannot be sent: not a list of messages, no message at all, a tool result
            without its call or a call without its result.
    """
    shown = list(messages)
    for processor in processors:
        name = getattr(processor, "__name__", type(processor).__name__)
        given = shown
        try:
            shown = processor(ctx, list(given))
        except Exception as exc:
            raise RunFailedError(
                f"history processor {name!r} raised {type(exc).__name__}: {exc}"
            ) from exc
        problem = _problem(shown)
        # A transcript the processor was given as it is (a restored one, say) is not its fault.
        if problem is not None and _problem(given) != problem:
            raise RunFailedError(f"history processor {name!r} {problem}")
    return shown


def _problem(messages: object) -> str | None:
    """What makes ``messages`` unfit for a request, or None."""
    if not isinstance(messages, list):
        return f"returned {type(messages).__name__}; return a list of messages"
    if not messages:
        return "returned no messages; keep at least the last one"
    answered: set[str] = set()
    open_calls: dict[str, str] = {}
    for message in messages:
        if not isinstance(message, _MESSAGE_TYPES):
            return f"returned a {type(message).__name__} among the messages"
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                open_calls[call.id] = call.name
        elif isinstance(message, ToolResultMessage):
            if message.tool_call_id not in open_calls:
                return (
                    f"kept the result of tool call {message.tool_call_id!r} but not the call; "
                    "keep a call and its result together"
                )
            answered.add(message.tool_call_id)
    missing = sorted(set(open_calls) - answered)
    if missing:
        return (
            f"kept tool call {missing[0]!r} but not its result; keep a call and its result together"
        )
    return None
