"""The public test doubles: ScriptedModel, FunctionModel, TestModel, and the network guard."""

from __future__ import annotations

import json
from typing import Any

import pytest

from actors import Agent, AssistantMessage, Message, Runtime, ToolResultMessage, tool
from actors.exceptions import ModelRequestsDisabled, RunFailedError
from actors.models import OpenAIChatModel
from actors.models._model import ModelResponse, ToolDefinition
from actors.testing import (
    FunctionModel,
    ScriptedModel,
    SyncDriver,
    TestModel,
    allow_model_requests,
    call,
    model_requests_allowed,
)

from .helpers import BOUND, tool_results


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


@tool
def greet(name: str, polite: bool = True) -> str:
    """Greet."""
    return f"hello {name}" if polite else name


# -- ScriptedModel ---------------------------------------------------------------------------------


def test_scripted_model_records_requests_and_assert_complete() -> None:
    model = ScriptedModel([call("add", a=1, b=2), "3"])
    with pytest.raises(AssertionError, match="fewer replies"):
        model.assert_complete()
    SyncDriver(Agent("a", model=model, tools=[add])).run("?")
    model.assert_complete()
    assert model.remaining == 0
    assert len(model.requests) == 2
    assert [t.name for t in model.requests[0].tools] == ["add"]


def test_assert_complete_fails_when_replies_are_left() -> None:
    model = ScriptedModel(["one", "two"])
    SyncDriver(Agent("a", model=model)).run("?")
    assert model.remaining == 1
    with pytest.raises(AssertionError, match="fewer replies than scripted"):
        model.assert_complete()


def test_running_out_of_replies_fails_the_run_saying_so() -> None:
    with pytest.raises(RunFailedError, match="ran out of replies"):
        SyncDriver(Agent("a", model=ScriptedModel([]))).run("?")


def test_scripted_exceptions_are_raised_as_model_failures() -> None:
    with pytest.raises(RunFailedError) as info:
        SyncDriver(Agent("a", model=ScriptedModel([OSError("down")]))).run("?")
    assert isinstance(info.value.__cause__, OSError)


def test_scripted_replies_of_every_shape() -> None:
    response = ModelResponse(AssistantMessage(content="full"), model_name="custom")
    model = ScriptedModel(
        [
            AssistantMessage(content="thinking", tool_calls=(call("add", a=1, b=1),)),
            [call("add", a=2, b=2), call("add", a=3, b=3)],
            response,
        ]
    )
    result = SyncDriver(Agent("a", model=model, tools=[add])).run("?")
    assert result.output == "full"
    assert [r.content for r in tool_results(result.messages)] == ["2", "4", "6"]
    assert [e.data["model"] for e in result.events if e.type == "step_end"][-1] == "custom"


def test_per_agent_scripts_give_each_agent_its_own_cursor() -> None:
    model = ScriptedModel(["first", "second"], per_agent=True)
    one = SyncDriver(Agent("a", model=model), agent_id="one")
    two = SyncDriver(Agent("a", model=model), agent_id="two")
    assert one.run("?").output == "first"
    assert two.run("?").output == "first"
    assert one.run("?").output == "second"
    with pytest.raises(AssertionError, match="two"):
        model.assert_complete()
    two.run("?")
    model.assert_complete()


def test_scripted_latency_is_cut_short_by_cancellation() -> None:
    model = ScriptedModel(["never seen"], latency=30)
    with Runtime() as rt:
        ref = rt.spawn(Agent("slow", model=model))
        future = ref.run_async("?")
        ref.cancel("user left")
        result = future.result(BOUND)  # well under the 30 s latency
    assert result.status == "cancelled"


# -- FunctionModel ---------------------------------------------------------------------------------


def test_function_model_sees_messages_and_tool_definitions() -> None:
    seen: list[tuple[list[Message], list[ToolDefinition]]] = []

    def reply(messages: list[Message], tools: list[ToolDefinition]) -> Any:
        seen.append((messages, tools))
        if not any(isinstance(m, ToolResultMessage) for m in messages):
            return call("add", a=2, b=3)
        return f"sum is {messages[-1].content}"

    result = SyncDriver(Agent("f", model=FunctionModel(reply), tools=[add])).run("2+3")
    assert result.output == "sum is 5"
    assert [t.name for t in seen[0][1]] == ["add"]
    assert seen[0][0][-1].content == "2+3"


def test_async_function_model() -> None:
    async def reply(messages: list[Message], tools: list[ToolDefinition]) -> str:
        return messages[-1].content.upper()

    model = FunctionModel(reply, name="shouter")
    result = SyncDriver(Agent("f", model=model)).run("hey")
    assert result.output == "HEY"
    assert (
        result.events[[e.type for e in result.events].index("request_header")].data["model"]
        == "shouter"
    )


# -- TestModel -------------------------------------------------------------------------------------


def test_test_model_calls_every_tool_once_with_schema_arguments() -> None:
    model = TestModel()
    result = SyncDriver(Agent("t", model=model, tools=[add, greet])).run("?")
    calls = [e.data for e in result.events if e.type == "tool_call"]
    assert [(c["name"], c["arguments"]) for c in calls] == [
        ("add", {"a": 0, "b": 0}),
        ("greet", {"name": "a"}),
    ]
    assert json.loads(result.output) == {"add": "0", "greet": "hello a"}
    assert len(model.requests) == 2


def test_test_model_text_and_tool_subset() -> None:
    model = TestModel(text="custom answer", call_tools=["greet"])
    result = SyncDriver(Agent("t", model=model, tools=[add, greet])).run("?")
    assert result.output == "custom answer"
    assert [e.data["name"] for e in result.events if e.type == "tool_call"] == ["greet"]


def test_test_model_without_tools_answers_at_once() -> None:
    result = SyncDriver(Agent("t", model=TestModel(text="hi"))).run("?")
    assert result.output == "hi"


def test_the_model_string_test_is_a_test_model() -> None:
    with Runtime() as rt:
        result = rt.spawn(Agent("t", model="test", tools=[add])).run("?")
    assert json.loads(result.output) == {"add": "0"}


# -- the network guard -----------------------------------------------------------------------------


@pytest.fixture
def real_model() -> OpenAIChatModel:
    # Loopback port 9 (discard): if the guard failed, nothing could leave the machine anyway.
    return OpenAIChatModel("gpt-test", base_url="http://127.0.0.1:9/v1", api_key="sk-test")


def test_switch_stops_network_models_before_any_request(real_model: OpenAIChatModel) -> None:
    with allow_model_requests(False):
        assert not model_requests_allowed()
        with pytest.raises(RunFailedError, match="switched off") as info:
            SyncDriver(Agent("net", model=real_model)).run("?")
    assert isinstance(info.value.__cause__, ModelRequestsDisabled)


def test_environment_variable_switches_requests_off(
    real_model: OpenAIChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACTORS_ALLOW_MODEL_REQUESTS", "0")
    with Runtime() as rt, pytest.raises(RunFailedError, match="switched off"):
        rt.spawn(Agent("net", model=real_model)).run("?")


def test_test_models_ignore_the_switch() -> None:
    with allow_model_requests(False):
        assert SyncDriver(Agent("t", model=ScriptedModel(["ok"]))).run("?").output == "ok"
        assert SyncDriver(Agent("t", model=TestModel(text="ok"))).run("?").output == "ok"


def test_scripted_model_is_thread_safe() -> None:
    model = ScriptedModel([str(i) for i in range(50)], per_agent=False)
    with Runtime() as rt:
        refs = [rt.spawn(Agent("p", model=model), agent_id=f"p{i}") for i in range(50)]
        futures = [ref.run_async("?") for ref in refs]
        outputs = [future.result(BOUND).output for future in futures]
    assert sorted(outputs, key=int) == [str(i) for i in range(50)]
    model.assert_complete()


def test_test_model_answers_json_text_from_the_output_schema() -> None:
    from pydantic import BaseModel

    from actors import Agent
    from actors.testing import SyncDriver
    from actors.testing import TestModel as Model

    class Weather(BaseModel):
        city: str
        celsius: float

    model = Model()
    result = SyncDriver(Agent("w", model=model, output_type=Weather)).run("weather?")
    assert result.output == Weather(city="a", celsius=0.0)
    schema = model.requests[0].output_schema
    assert schema is not None
    assert set(schema["properties"]) == {"city", "celsius"}
