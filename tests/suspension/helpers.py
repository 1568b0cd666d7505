"""Small helpers shared by the suspension tests."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from actors import Event, Message, Pending, Request, RunContext, Runtime, ToolResultMessage, tool

BOUND = 10.0


def tool_results(messages: Iterable[Message]) -> list[ToolResultMessage]:
    return [m for m in messages if isinstance(m, ToolResultMessage)]


def events_of(events: Iterable[Event], kind: str) -> list[dict[str, Any]]:
    return [e.data for e in events if e.type == kind]


def wait_stopped(rt: Runtime, *agent_ids: str) -> None:
    for agent_id in agent_ids:
        node = rt._host.nodes.get(agent_id)
        if node is None:
            continue  # stopped and forgotten already
        assert node.ref.actor_stopped.wait(BOUND), f"{agent_id} is still running"


CALLS: list[tuple[str, Any]] = []
"""Every call of `ask` with the answer it saw (None on the first call)."""


@tool
def ask(ctx: RunContext, question: str) -> Any:  # type: ignore[type-arg]
    """Ask the host a question and wait for the answer.

    Args:
        question: What to ask.
    """
    CALLS.append((question, ctx.answer))
    if ctx.answer is None:
        return Pending(Request(kind="input", prompt=question, data={"q": question}))
    if not ctx.answer.ok:
        return f"declined: {ctx.answer.reason}"
    return f"{question} -> {ctx.answer.data}"
