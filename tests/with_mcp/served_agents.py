"""Agents that the tests serve over MCP (`actors mcp serve`): offline, transcript-driven."""

from __future__ import annotations

from actors import (
    Agent,
    Message,
    Pending,
    Request,
    RunContext,
    ToolResultMessage,
    UserMessage,
    tool,
)
from actors.testing import FunctionModel, call


def _this_run(messages: list[Message]) -> list[Message]:
    last_user = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage))
    return messages[last_user + 1 :]


def _echo(messages: list[Message], _tools: object) -> object:
    task = [m for m in messages if isinstance(m, UserMessage)][-1].content
    return f"echo: {task}"


echo = Agent("echo", model=FunctionModel(_echo), description="Repeat the task back.")


@tool
def ask_city(ctx: RunContext) -> object:
    """Ask the user for a city."""
    if ctx.answer is None:
        return Pending(Request(kind="input", prompt="Which city?"))
    if not ctx.answer.ok:
        return f"no city ({ctx.answer.reason})"
    return f"city: {ctx.answer.data}"


@tool(requires_approval=True)
def book(city: str) -> str:
    """Book a trip.

    Args:
        city: Where to.
    """
    return f"booked {city}"


def _travel(messages: list[Message], _tools: object) -> object:
    done = [m for m in _this_run(messages) if isinstance(m, ToolResultMessage)]
    if not done:
        return call("ask_city")
    if len(done) == 1:
        if not done[0].content.startswith("city: "):
            return f"gave up: {done[0].content}"
        return call("book", city=done[0].content.removeprefix("city: "))
    return f"travel: {done[-1].content}"


traveller = Agent("traveller", model=FunctionModel(_travel), tools=[ask_city, book])
