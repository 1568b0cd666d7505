"""Regression tests for bugs found in review of tools, output, subagent calls, store and CLI."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from actors import Agent, Answer, ContextUpdate, Runtime, Subagent, ToolResultMessage, tool
from actors.cli._session import render_output
from actors.exceptions import AgentDefinitionError, UserError
from actors.loop._subagent_calls import subagent_definition
from actors.store import MemoryStore
from actors.testing import ScriptedModel, TestModel, call


class Point(BaseModel):
    x: int
    y: int


class Shape(BaseModel):
    points: list[Point]


def _refs(schema: Any) -> list[str]:
    if isinstance(schema, dict):
        found = [schema["$ref"]] if isinstance(schema.get("$ref"), str) else []
        return found + [r for value in schema.values() for r in _refs(value)]
    if isinstance(schema, list):
        return [r for value in schema for r in _refs(value)]
    return []


def _resolves(schema: dict[str, Any], ref: str) -> bool:
    node: Any = schema
    for part in ref.removeprefix("#/").split("/"):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


@tool
def noop() -> str:
    """Do nothing."""
    return "ok"


def test_a_wrapped_output_type_has_its_definitions_at_the_schema_root() -> None:
    agent = Agent("a", model=TestModel(), tools=[noop], output_type=Point | None)  # type: ignore[arg-type]
    with Runtime() as rt:
        result = rt.spawn(agent).run("go", timeout=5)
    assert result.output == Point(x=0, y=0)
    (final,) = [t for t in agent.model.requests[0].tools if t.name == "final_result"]  # type: ignore[union-attr]
    refs = _refs(final.parameters)
    assert refs
    assert all(_resolves(final.parameters, ref) for ref in refs)


def test_a_subagent_input_with_nested_models_has_resolvable_refs() -> None:
    child = Agent("child", model=TestModel(text="done"))
    definition = subagent_definition(Subagent(child, input_type=Shape))
    refs = _refs(definition.parameters)
    assert refs
    assert all(_resolves(definition.parameters, ref) for ref in refs)


def test_a_tool_argument_defaulting_to_a_pydantic_field_gets_the_default() -> None:
    seen: list[Any] = []

    @tool
    def pick(
        a: Annotated[int, Field(description="how many")],
        b: int = Field(default=3, description="bee"),
    ) -> str:
        """Pick."""
        seen.append(b)
        return "ok"

    assert pick.parameters["properties"]["a"]["description"] == "how many"
    assert pick.parameters["properties"]["b"]["default"] == 3
    assert pick.parameters["properties"]["b"]["description"] == "bee"
    assert pick.validate({"a": 1}) == {"a": 1, "b": 3}


def test_spawning_over_a_stored_session_is_refused_before_anything_runs() -> None:
    with MemoryStore() as store:
        with Runtime() as rt:
            first = rt.spawn(Agent("a", model=ScriptedModel(["one"])), store=store, session_id="s")
            assert first.run("hi", timeout=5).output == "one"
        before = store.load("s")
        model = ScriptedModel(["two"])
        with Runtime() as rt:
            with pytest.raises(UserError, match="restore"):
                rt.spawn(Agent("a", model=model), store=store, session_id="s")
            # The id it would have taken is free again.
            assert rt.spawn(Agent("a", model=ScriptedModel(["x"]))).agent_id == "a"
        assert model.requests == []
        assert store.load("s").agents == before.agents


def test_a_tool_named_like_the_final_result_tool_is_refused() -> None:
    @tool
    def final_result(x: int) -> str:
        """A user's tool that the output tool would shadow."""
        return "ran"

    with pytest.raises(AgentDefinitionError, match="final_result"):
        Agent("a", model=TestModel(), tools=[final_result], output_type=Point)


def test_bad_agent_config_is_refused_at_definition_not_mid_run() -> None:
    class Plain:
        def __init__(self, a: int) -> None:
            self.a = a

    with pytest.raises(AgentDefinitionError, match="usage_limits"):
        Agent("a", model=TestModel(), usage_limits={"requests": 1})  # type: ignore[arg-type]
    with pytest.raises(AgentDefinitionError, match="output_type"):
        Agent("a", model=TestModel(), output_type=Plain)
    with pytest.raises(AgentDefinitionError, match="input_type"):
        Agent("a", subagents=[Subagent(Agent("c"), input_type=Plain)])


def test_a_tool_returning_only_a_context_update_has_it_applied() -> None:
    @tool
    def remember() -> ContextUpdate:
        """Remember something."""
        return ContextUpdate().set("seen", True)

    agent = Agent("a", model=ScriptedModel([call("remember"), "done"]), tools=[remember])
    with Runtime() as rt:
        result = rt.spawn(agent).run("go", timeout=5)
    assert result.metadata["seen"] is True
    assert "ContextUpdate" not in str(result.messages[-2])


def test_the_cli_prints_a_list_of_models_as_json() -> None:
    text = render_output([Point(x=1, y=2)])
    assert json.loads(text) == [{"x": 1, "y": 2}]


@tool(requires_approval=True)
def danger() -> str:
    """Do something that needs approval."""
    return "danger done"


def _team(a_script: list[Any], b_script: list[Any], boss_script: list[Any]) -> Agent[str]:
    # Two subagents whose specs share a name but not their tools.
    a = Agent("worker", model=ScriptedModel(a_script), tools=[danger])
    b = Agent("worker", model=ScriptedModel(b_script))
    return Agent("boss", model=ScriptedModel(boss_script), subagents={"a": a, "b": b})


def test_a_restored_child_gets_the_spec_of_the_subagent_that_spawned_it() -> None:
    with MemoryStore() as store:
        with Runtime() as rt:
            first = rt.spawn(
                _team([call("danger"), "a done"], ["b done"], [call("a", task="x"), "boss done"]),
                store=store,
                session_id="s",
            ).run("go", timeout=5)
        assert first.status == "suspended"
        (request,) = first.requests
        with Runtime() as rt:
            ref = rt.restore("s", store=store, agents=[_team(["a done"], ["b done"], ["done"])])
            resumed = ref.resume({request.id: Answer(ok=True)}, timeout=5)
        assert resumed.completed
        child = store.load("s").agent(request.agent_id).context["events"]
        results = [e["data"]["content"] for e in child if e["type"] == "tool_result"]
        assert results == ["danger done"]


class _Handle:
    """Not JSON: a connection, a file, ..."""


class _WithHandle(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    name: str
    handle: _Handle


def test_a_tool_returning_a_model_that_cannot_be_dumped_is_not_reported_as_failed() -> None:
    @tool
    def make() -> _WithHandle:
        """Make a thing."""
        return _WithHandle(name="thing", handle=_Handle())

    agent = Agent("a", model=ScriptedModel([call("make"), "done"]), tools=[make])
    with Runtime() as rt:
        result = rt.spawn(agent).run("go", timeout=5)
    tool_result = result.messages[-2]
    assert isinstance(tool_result, ToolResultMessage)
    assert not tool_result.is_error
    assert "thing" in tool_result.content


def test_a_plain_text_answer_fits_a_string_like_output_type() -> None:
    yes_no = Agent("a", model=ScriptedModel(["yes"]), output_type=Literal["yes", "no"])  # type: ignore[arg-type]
    maybe = Agent("b", model=ScriptedModel(["hello there"]), output_type=str | None)  # type: ignore[arg-type]
    with Runtime() as rt:
        assert rt.spawn(yes_no).run("go", timeout=5).output == "yes"
        assert rt.spawn(maybe).run("go", timeout=5).output == "hello there"
