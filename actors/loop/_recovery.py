"""Crash recovery of a restored context, before anything new runs.

A turn that has no end and waits on nobody was interrupted: each of its tool calls without a
result is classified (not started, or outcome unknown: it may have run) and answered with a
synthetic result that says which, and the turn gets ``turn_end`` with reason ``interrupted``.
Running it twice adds nothing.
"""

from __future__ import annotations

from actors.context._agent_context import INTERRUPTED_NOT_STARTED, AgentContext
from actors.context._messages import AssistantMessage, ToolCall, ToolResultMessage, UserMessage
from actors.loop._peers import peer_message

__all__ = ["OUTCOME_UNKNOWN", "open_turn", "open_turn_start", "recover", "undelivered"]

OUTCOME_UNKNOWN = (
    "Tool call was interrupted and its outcome is unknown: it may have run. "
    "Verify the state it would have changed before retrying."
)


def open_turn(ctx: AgentContext) -> str | None:
    """The run id of a turn that started and never ended, or None."""
    return ctx._open_turn  # folded: no event is read


def open_turn_start(ctx: AgentContext) -> int:
    """A seq from which the log shows the open turn and every tool call still unanswered.

    The open turn's start, or the message of an older call without a result, if any: a scan
    from here sees what one of the whole log would (the events of a call follow its message).
    """
    start = max(ctx._turn_seq, 0)
    answered = {m.tool_call_id for m in ctx.messages if isinstance(m, ToolResultMessage)}
    for message, _, seq in ctx.entries:
        if seq >= start:
            break
        if isinstance(message, AssistantMessage) and any(
            c.id not in answered for c in message.tool_calls
        ):
            return 0  # rare: an older call without a result; read the whole log
    return start


def recover(ctx: AgentContext, *, waiting: bool) -> list[ToolCall]:
    """Close an interrupted turn of ``ctx``; returns the calls that got synthetic results.

    Args:
        ctx: The restored context.
        waiting: Whether the agent legitimately waits (an open suspension of its own or of a
            child it waits on); a waiting turn is not interrupted.
    """
    run_id = open_turn(ctx)
    if run_id is None or waiting:
        return []
    started = {
        e.data.get("tool_call_id")
        for e in ctx.events_since(open_turn_start(ctx))
        if e.type == "tool_call"
    }

    def content(call: ToolCall) -> str:
        return OUTCOME_UNKNOWN if call.id in started else INTERRUPTED_NOT_STARTED

    patched = ctx.patch_dangling_tool_calls(content)
    _deliver_waiting(ctx)
    ctx.log_event(
        "recovered",
        {
            "run_id": run_id,
            "not_started": [c.id for c in patched if c.id not in started],
            "outcome_unknown": [c.id for c in patched if c.id in started],
        },
    )
    ctx.log_event("turn_end", {"run_id": run_id, "reason": "interrupted"})
    return patched


def undelivered(ctx: AgentContext, start: int) -> list[tuple[UserMessage, str]]:
    """Messages of the turn from ``start`` logged on arrival but not yet in the transcript.

    A steer (``ref.send``) and a peer message that reach a running agent are logged at once
    and join the transcript at its next step boundary: a crash or a suspension in between
    leaves them waiting. Each comes with its transcript source (``"steer"`` or ``"peer"``).
    """
    arrived: list[tuple[UserMessage, str]] = []  # in the order they came
    given = {"steer": 0, "peer": 0}
    for event in ctx.events_since(start):
        kind, data = event.type, event.data
        if kind == "steered":
            arrived.append((UserMessage(content=data.get("content", "")), "steer"))
        elif kind == "message_received":
            arrived.append((peer_message(data["from"], data["content"]), "peer"))
        elif kind == "user_message" and data.get("source") in given:
            given[data["source"]] += 1
    waiting = []
    for message, source in arrived:  # the first ones of each source were given already
        if given[source]:
            given[source] -= 1
        else:
            waiting.append((message, source))
    return waiting


def _deliver_waiting(ctx: AgentContext) -> None:
    """Hand the transcript what reached the agent and the crash kept from it."""
    start = max(ctx._turn_seq, 0)  # the last turn_start
    for message, source in undelivered(ctx, start):
        ctx._add_message(message, source=source)
