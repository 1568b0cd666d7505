"""Structured output: the final-result tool, JSON text, validation retries."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from actors import Agent, UserMessage, tool
from actors.exceptions import OutputValidationError
from actors.loop._output import FINAL_RESULT_TOOL, OutputSchema
from actors.testing import ScriptedModel, SyncDriver, TestModel, call

from .helpers import tool_results


class City(BaseModel):
    name: str
    population: int


@tool
def lookup(name: str) -> str:
    """Look a city up."""
    return f"{name}: 1000"


def test_final_result_tool_is_offered_when_the_agent_has_tools() -> None:
    model = ScriptedModel([call(FINAL_RESULT_TOOL, name="Lyon", population=500_000)])
    result = SyncDriver(Agent("geo", model=model, tools=[lookup], output_type=City)).run("Lyon?")
    assert result.output == City(name="Lyon", population=500_000)
    offered = {t.name: t for t in model.requests[0].tools}
    assert set(offered) == {"lookup", FINAL_RESULT_TOOL}
    assert offered[FINAL_RESULT_TOOL].parameters["required"] == ["name", "population"]
    # The call gets a result, so the transcript stays well formed for the next run.
    assert tool_results(result.messages)[-1].content == "Final result processed."


def test_invalid_final_result_goes_back_with_the_errors_then_succeeds() -> None:
    model = ScriptedModel(
        [
            call(FINAL_RESULT_TOOL, name="Lyon", population="many"),
            call(FINAL_RESULT_TOOL, name="Lyon", population=5),
        ]
    )
    agent = Agent("geo", model=model, tools=[lookup], output_type=City)
    result = SyncDriver(agent).run("Lyon?")
    assert result.output == City(name="Lyon", population=5)
    error = tool_results(result.messages)[0]
    assert error.is_error
    assert "population" in error.content
    assert "valid integer" in error.content


def test_invalid_final_result_past_the_budget_is_an_output_validation_error() -> None:
    bad = [call(FINAL_RESULT_TOOL, name="Lyon") for _ in range(3)]
    agent = Agent(
        "geo", model=ScriptedModel(bad), tools=[lookup], output_type=City, output_retries=2
    )
    with pytest.raises(OutputValidationError) as info:
        SyncDriver(agent).run("Lyon?")
    assert "population" in str(info.value)
    assert len(tool_results(info.value.messages)) == 3


def test_text_instead_of_the_final_result_tool_is_retried() -> None:
    model = ScriptedModel(["It is Lyon.", call(FINAL_RESULT_TOOL, name="Lyon", population=1)])
    result = SyncDriver(Agent("geo", model=model, tools=[lookup], output_type=City)).run("?")
    assert result.output == City(name="Lyon", population=1)
    nudge = [m for m in result.messages if isinstance(m, UserMessage)][-1]
    assert FINAL_RESULT_TOOL in nudge.content


def test_text_past_the_budget_is_an_output_validation_error() -> None:
    agent = Agent("geo", model=ScriptedModel(["a", "b"]), tools=[lookup], output_type=City)
    with pytest.raises(OutputValidationError):
        SyncDriver(agent).run("?")


def test_tools_after_the_final_result_are_not_run() -> None:
    ran: list[str] = []

    @tool
    def side_effect(tag: str) -> str:
        """Record."""
        ran.append(tag)
        return tag

    model = ScriptedModel(
        [
            [
                call("side_effect", tag="before"),
                call(FINAL_RESULT_TOOL, name="x", population=1),
                call("side_effect", tag="after"),
            ]
        ]
    )
    agent = Agent("geo", model=model, tools=[side_effect], output_type=City)
    result = SyncDriver(agent).run("?")
    assert ran == ["before"]
    assert result.output == City(name="x", population=1)
    last = tool_results(result.messages)[-1]
    assert last.is_error
    assert "not executed" in last.content


def test_plain_output_types_are_wrapped_in_a_result_field() -> None:
    model = ScriptedModel([call(FINAL_RESULT_TOOL, result=[1, 2, 3])])
    result = SyncDriver(Agent("n", model=model, tools=[lookup], output_type=list[int])).run("?")
    assert result.output == [1, 2, 3]
    schema = model.requests[0].tools[-1].parameters
    assert schema["required"] == ["result"]


# -- JSON text mode (no tools) ---------------------------------------------------------------------


def test_json_text_is_parsed_when_the_agent_has_no_tools() -> None:
    model = ScriptedModel(['```json\n{"name": "Lyon", "population": 7}\n```'])
    result = SyncDriver(Agent("geo", model=model, output_type=City)).run("?")
    assert result.output == City(name="Lyon", population=7)
    assert model.requests[0].tools == ()


def test_json_mode_tells_the_model_the_schema() -> None:
    model = ScriptedModel(['{"name": "Lyon", "population": 7}'])
    SyncDriver(Agent("geo", model=model, output_type=City)).run("?")
    shown = " ".join(str(m.content) for m in model.requests[0].messages)
    assert '"population"' in shown


def test_invalid_json_text_is_retried_with_the_errors() -> None:
    model = ScriptedModel(['{"name": "Lyon"}', '{"name": "Lyon", "population": 3}'])
    result = SyncDriver(Agent("geo", model=model, output_type=City)).run("?")
    assert result.output == City(name="Lyon", population=3)
    retry = model.requests[1].messages[-1]
    assert isinstance(retry, UserMessage)
    assert "population" in retry.content
    assert "JSON" in retry.content


def test_invalid_json_text_past_the_budget_fails_with_the_transcript() -> None:
    model = ScriptedModel(["not json", "still not", "nope"])
    agent = Agent("geo", model=model, output_type=City, output_retries=2)
    with pytest.raises(OutputValidationError) as info:
        SyncDriver(agent).run("?")
    assert [m.content for m in info.value.messages if m.role == "assistant"] == [
        "not json",
        "still not",
        "nope",
    ]
    model.assert_complete()


def test_scalar_json_text() -> None:
    result = SyncDriver(Agent("n", model=ScriptedModel(["42"]), output_type=int)).run("?")
    assert result.output == 42


def test_str_output_type_is_plain_text() -> None:
    model = ScriptedModel(["just text"])
    result = SyncDriver(Agent("t", model=model, output_type=str, tools=[lookup])).run("?")
    assert result.output == "just text"
    assert FINAL_RESULT_TOOL not in {t.name for t in model.requests[0].tools}


def test_test_model_fills_the_final_result_from_its_schema() -> None:
    result = SyncDriver(Agent("geo", model=TestModel(), tools=[lookup], output_type=City)).run("?")
    assert result.output == City(name="a", population=0)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [({"result": 5}, 5), ({"other": 1}, None)],
)
def test_output_schema_from_arguments_for_wrapped_types(arguments: Any, expected: Any) -> None:
    schema = OutputSchema(int)
    if expected is None:
        with pytest.raises(ValueError, match="valid"):
            schema.from_arguments(arguments)
    else:
        assert schema.from_arguments(arguments) == expected


def test_output_schema_json_shape() -> None:
    schema = OutputSchema(City)
    assert not schema.wrapped
    assert json.loads(json.dumps(schema.tool.parameters))["required"] == ["name", "population"]
