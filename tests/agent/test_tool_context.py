"""Tools get the tool_context read-only: a write fails the call, and the caller's object stays."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from actors import Agent, RunContext, Runtime, tool
from actors.testing import ScriptedModel, SyncDriver, call

from .helpers import tool_results


@tool
def remember(ctx: RunContext[Any], key: str, value: str) -> str:
    """Try to write into the tool_context.

    Args:
        key: Where.
        value: What.
    """
    ctx.tool_context[key] = value
    return "remembered"


@tool
def grow(ctx: RunContext[Any]) -> str:
    """Try to change a list inside the tool_context."""
    ctx.tool_context["hosts"].append("evil")
    return "grown"


@tool
def read(ctx: RunContext[Any], key: str) -> str:
    """Read a key.

    Args:
        key: Which.
    """
    return str(ctx.tool_context.get(key))


def test_a_tool_cannot_change_a_mapping_tool_context(rt: Runtime) -> None:
    model = ScriptedModel(
        [
            [call("remember", key="user", value="mallory"), call("grow")],
            call("read", key="user"),
            "done",
        ]
    )
    deps: dict[str, Any] = {"user": "ada", "hosts": ["db-1"]}
    ref = rt.spawn(Agent("a", model=model, tools=[remember, grow, read]), tool_context=deps)
    result = ref.run("?")
    write, append, after = tool_results(result.messages)
    assert write.is_error
    assert append.is_error
    assert write.content.startswith(
        "ToolContextReadOnlyError: tool_context['user'] is read-only: a tool cannot set a key"
    )
    assert "tool_context['hosts'] is read-only" in append.content
    assert after.content == "ada"  # the next step sees what the caller gave
    assert deps == {"user": "ada", "hosts": ["db-1"]}  # and the caller's object never changed
    assert result.output == "done"


def test_the_sync_driver_hands_tools_the_same_view() -> None:
    deps: dict[str, Any] = {"user": "ada", "hosts": ["db-1"]}
    model = ScriptedModel([call("remember", key="user", value="x"), "done"])
    result = SyncDriver(Agent("a", model=model, tools=[remember]), tool_context=deps).run("?")
    assert tool_results(result.messages)[0].is_error
    assert deps["user"] == "ada"


@dataclass
class MutableDeps:
    counter: int = 0


def test_a_tool_context_that_is_not_a_mapping_is_passed_as_it_is(rt: Runtime) -> None:
    seen: list[Any] = []

    @tool
    def look(ctx: RunContext[MutableDeps]) -> str:
        """Look at the tool_context."""
        seen.append(ctx.tool_context)
        return "ok"

    deps = MutableDeps()
    model = ScriptedModel([call("look"), "done"])
    rt.spawn(Agent("a", model=model, tools=[look]), tool_context=deps).run("?")
    assert seen == [deps]
    assert seen[0] is deps
