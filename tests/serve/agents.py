"""Agents the serving tests serve: a function model that answers by the prompt.

``hello`` (anything) -> "Hello, <prompt>!"; ``team`` -> a subagent, then an answer;
``approve`` -> a tool that needs approval; ``wait`` -> a tool that blocks until the test opens
``tool_context["gate"]``; ``peek`` -> a tool that reads the secret of ``tool_context``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from actors import Agent, Message, RunContext, Subagent, tool
from actors.testing import FunctionModel, call

SECRET = "tOpSeCrEt-4711"


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file.

    Args:
        path: Which file.
    """
    return f"deleted {path}"


@tool
def wait_gate(ctx: RunContext[Any]) -> str:
    """Wait until the test opens the gate."""
    gate: threading.Event = ctx.tool_context["gate"]
    opened = gate.wait(30)
    return "the gate opened" if opened else "the gate stayed shut"


@tool
def peek(ctx: RunContext[Any]) -> str:
    """Look at the secret (and say only that it is there)."""
    return f"a secret of {len(ctx.tool_context['secret'])} characters"


def _reply(messages: Sequence[Message], _tools: Any) -> Any:
    last = messages[-1]
    if last.role == "tool":
        return f"Finished: {last.content}"
    text = str(getattr(last, "text", ""))
    if text.startswith("team"):
        return call("helper", task="look it up")
    if text == "approve":
        return call("delete_file", path="/tmp/x")
    if text == "wait":
        return call("wait_gate")
    if text == "peek":
        return call("peek")
    return f"Hello, {text}!"


def make_agent(chunk_size: int | None = 4) -> Agent[str]:
    """A fresh spec (its own model) of the served test agent."""
    model = FunctionModel(_reply, chunk_size=chunk_size)
    helper = Agent("helper", model=model, description="Looks things up.")
    return Agent(
        "assistant",
        model=model,
        tools=[delete_file, wait_gate, peek],
        subagents=[Subagent(helper)],
        description="A test assistant.",
    )


assistant = make_agent()


def tool_context() -> dict[str, Any]:
    """A tool context with a gate and a secret that must never leave the server."""
    return {"gate": threading.Event(), "secret": SECRET}
