"""`@tool` / `Tool.from_function`: what the model is shown, and what the tool receives."""

from __future__ import annotations

from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field, ValidationError

from actors import Agent, ContextUpdate, RunContext, Tool, ToolResult, tool
from actors.exceptions import AgentDefinitionError, ToolDefinitionError
from actors.testing import ScriptedModel, SyncDriver, call


class Deps(BaseModel):
    db: str


class Point(BaseModel):
    x: int
    y: int


def test_schema_comes_from_hints_and_google_docstring() -> None:
    @tool
    def search(query: str, limit: int = 10, mode: Literal["fast", "deep"] = "fast") -> list[str]:
        """Search the index.

        Longer explanation that the model also reads.

        Args:
            query: What to look for.
            limit: How many hits to return, at most.
                Continued on a second line.
            mode: How hard to look.

        Returns:
            The hits.
        """
        return []

    definition = search.definition
    assert definition.name == "search"
    assert definition.description == (
        "Search the index.\n\nLonger explanation that the model also reads."
    )
    assert definition.parameters == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for."},
            "limit": {
                "type": "integer",
                "default": 10,
                "description": "How many hits to return, at most. Continued on a second line.",
            },
            "mode": {
                "type": "string",
                "enum": ["fast", "deep"],
                "default": "fast",
                "description": "How hard to look.",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    }


def test_nested_models_are_in_the_schema_and_validated_into_instances() -> None:
    @tool
    def move(to: Point, label: Annotated[str, Field(max_length=3)] = "") -> str:
        """Move."""
        return ""

    assert "$defs" in move.parameters
    arguments = move.validate({"to": {"x": 1, "y": "2"}})
    assert arguments == {"to": Point(x=1, y=2), "label": ""}
    with pytest.raises(ValidationError):
        move.validate({"to": {"x": 1, "y": 2}, "label": "toolong"})
    with pytest.raises(ValidationError):
        move.validate({"to": {"x": 1, "y": 2}, "unexpected": 1})


def test_run_context_first_parameter_is_not_an_argument() -> None:
    @tool
    def lookup(ctx: RunContext[Deps], key: str) -> str:
        """Look a key up."""
        return f"{ctx.tool_context.db}:{key}"

    assert lookup.takes_ctx
    assert list(lookup.parameters["properties"]) == ["key"]
    ctx = RunContext(tool_context=Deps(db="main"))
    assert lookup.invoke(ctx, lookup.validate({"key": "k"})) == "main:k"


def test_bare_run_context_annotation_is_recognised() -> None:
    @tool
    def who(ctx: RunContext) -> str:  # type: ignore[type-arg]
        """Who runs me."""
        return ctx.agent_id

    assert who.takes_ctx
    assert who.parameters["properties"] == {}


def test_async_functions_become_async_tools() -> None:
    @tool
    async def fetch(url: str) -> str:
        """Fetch."""
        return url

    @tool
    def local(url: str) -> str:
        """Fetch locally."""
        return url

    assert fetch.is_async
    assert not local.is_async


def test_options_of_the_decorator() -> None:
    @tool(name="renamed", description="Custom.", max_retries=3, timeout=2.5, requires_approval=True)
    def original() -> None:
        """Ignored summary."""

    assert (original.name, original.description) == ("renamed", "Custom.")
    assert (original.max_retries, original.timeout, original.requires_approval) == (3, 2.5, True)


def test_from_function_equals_decorator() -> None:
    def add(a: int, b: int) -> int:
        """Add.

        Args:
            a: First.
            b: Second.
        """
        return a + b

    assert Tool.from_function(add).definition == tool(add).definition


def test_missing_hints_mean_any() -> None:
    def loose(value, other: int = 1):  # type: ignore[no-untyped-def]
        return value

    loose_tool = Tool.from_function(loose)
    assert loose_tool.validate({"value": [1, {"a": None}]}) == {
        "value": [1, {"a": None}],
        "other": 1,
    }


def test_unusable_names_are_refused() -> None:
    with pytest.raises(ToolDefinitionError, match="must be letters"):
        Tool.from_function(lambda: None)
    with pytest.raises(ToolDefinitionError, match="must be letters"):
        Tool.from_function(len, name="has space")


def test_star_args_are_refused() -> None:
    def spread(*items: int) -> None:
        """Spread."""

    def kw(**options: int) -> None:
        """Keywords."""

    with pytest.raises(ToolDefinitionError, match=r"\*items"):
        tool(spread)
    with pytest.raises(ToolDefinitionError, match=r"\*options"):
        tool(kw)


def test_run_context_elsewhere_than_first_is_refused() -> None:
    def late(key: str, ctx: RunContext[Deps]) -> None:
        """Late."""

    with pytest.raises(ToolDefinitionError, match="first parameter"):
        tool(late)


def test_unresolvable_hint_names_the_tool() -> None:
    def broken(x: Undefined) -> None:  # type: ignore[name-defined]  # noqa: F821
        """Broken."""

    with pytest.raises(ToolDefinitionError, match="'broken'"):
        tool(broken)


def test_non_positive_timeout_is_refused() -> None:
    with pytest.raises(ToolDefinitionError, match="timeout"):
        tool(name="t", timeout=0)(lambda: None)


def test_not_callable_is_refused() -> None:
    with pytest.raises(ToolDefinitionError):
        Tool.from_function(42)  # type: ignore[arg-type]


def test_tool_result_defaults() -> None:
    assert ToolResult("x") == ToolResult(output="x", is_error=False)


def test_agent_turns_plain_functions_into_tools_and_refuses_duplicates() -> None:
    def ping() -> str:
        """Ping."""
        return "pong"

    agent = Agent("a", tools=[ping])
    assert list(agent.tool_map) == ["ping"]
    assert isinstance(agent.tool_map["ping"], Tool)
    with pytest.raises(AgentDefinitionError, match="ping"):
        Agent("a", tools=[ping, tool(ping)])


def test_arguments_named_like_basemodel_methods_raise_no_warning() -> None:
    import warnings

    from actors import tool as make_tool

    def fetch(json: str, schema: int = 1) -> str:
        """Fetch.

        Args:
            json: A JSON document.
            schema: A schema version.
        """
        return json

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fetched = make_tool(fetch)
    assert fetched.validate({"json": "{}"}) == {"json": "{}", "schema": 1}


@tool
def _todo(ctx, item: str) -> tuple[str, ContextUpdate]:  # type: ignore[no-untyped-def]
    """Add an item.

    Args:
        item: The item.
    """
    return "ok", ContextUpdate().set("todos", [*ctx.metadata.get("todos", []), item])


def test_a_first_parameter_named_ctx_without_a_hint_is_the_run_context() -> None:
    assert _todo.takes_ctx
    assert list(_todo.parameters["properties"]) == ["item"]
    model = ScriptedModel([call("_todo", item="tea"), "done"])
    result = SyncDriver(Agent("a", model=model, tools=[_todo]), metadata={"todos": ["milk"]}).run(
        "go"
    )
    assert result.metadata["todos"] == ("milk", "tea")
