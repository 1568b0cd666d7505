"""Crash recovery of a restored context, before anything new runs.

A turn that has no end and waits on nobody was interrupted: each of its tool calls without a
result is classified (not started, or outcome unknown: it may have run) and answered with a
synthetic result that says which, and the turn gets ``turn_end`` with reason ``interrupted``.
Running it twice adds nothing.
"""

from __future__ import annotations

from actors.context._agent_context import INTERRUPTED_NOT_STARTED, AgentContext
from actors.context._messages import ToolCall, UserMessage
from actors.loop._peers import peer_message

__all__ = ["OUTCOME_UNKNOWN", "open_turn", "recover", "undelivered"]

OUTCOME_UNKNOWN = (
    "Tool call was interrupted and its outcome is unknown: it may have run. "
    "Verify the state it would have changed before retrying."
)


def open_turn(ctx: AgentContext) -> str | None:
    """The run id of a turn that started and never ended, or None."""
    run_id: str | None = None
    for event in ctx.events:
        if event.type == "turn_start":
            run_id = event.data.get("run_id", "")
        elif event.type == "turn_end":
            run_id = None
    return run_id


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
    started = {e.data.get("tool_call_id") for e in ctx.events if e.type == "tool_call"}

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
    start = max((e.seq for e in ctx.events if e.type == "turn_start"), default=0)
    for message, source in undelivered(ctx, start):
        ctx._add_message(message, source=source)
