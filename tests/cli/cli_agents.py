"""Agents that the CLI tests run with ``actors run``: offline, transcript-driven models."""

from __future__ import annotations

from actors import (
    Agent,
    AssistantMessage,
    ContextUpdate,
    Message,
    RunContext,
    ToolResultMessage,
    UserMessage,
    tool,
)
from actors.testing import FunctionModel, ScriptedModel, call


def _this_run(messages: list[Message]) -> list[Message]:
    last_user = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage))
    return messages[last_user + 1 :]


@tool
def whoami(ctx: RunContext) -> tuple[str, ContextUpdate]:
    """Say who the user is and count the greetings."""
    user = ctx.tool_context.get("user", "nobody")
    lang = ctx.metadata.get("lang", "en")
    count = int(ctx.metadata.get("greetings", 0)) + 1
    return f"{user} ({lang})", ContextUpdate().set("greetings", count)


def _greet(messages: list[Message], _tools: object) -> object:
    done = [m for m in _this_run(messages) if isinstance(m, ToolResultMessage)]
    if not done:
        return call("whoami")
    turns = sum(isinstance(m, UserMessage) for m in messages)
    return f"hello {done[-1].content}, turn {turns}"


greeter = Agent("greeter", model=FunctionModel(_greet), tools=[whoami])


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (pretend).

    Args:
        path: The file.
    """
    return f"deleted {path}"


def _guard(messages: list[Message], _tools: object) -> object:
    done = [m for m in _this_run(messages) if isinstance(m, ToolResultMessage)]
    if not done:
        return call("delete_file", path="/tmp/x")
    return f"result: {done[-1].content}"


guarded = Agent("guarded", model=FunctionModel(_guard), tools=[delete_file])


def make_greeter() -> Agent:
    return greeter


not_an_agent = 42
_ = AssistantMessage


@tool
def explode() -> str:
    """Fail, as a broken tool does."""
    raise RuntimeError("the tool broke")


failing = Agent(
    "failing", model=ScriptedModel([call("explode"), "Sorry, it broke."]), tools=[explode]
)
