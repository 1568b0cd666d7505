"""Every shape a tool may return (or raise), as the model and the metadata see it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

from actors import Agent, ContextUpdate, Pending, Request, Runtime, ToolResult, tool
from actors.exceptions import Cancelled
from actors.loop._outcome import LEGACY_UPDATE_KEY, outcome_of_error, outcome_of_return, render
from actors.loop._types import ToolOutcome
from actors.testing import ScriptedModel, SyncDriver, call

from .helpers import tool_results


class Hit(BaseModel):
    title: str
    score: float


@dataclass
class Pair:
    a: int
    b: str


class Opaque:
    def __repr__(self) -> str:
        return "<opaque>"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("plain text", "plain text"),
        (42, "42"),
        (None, "null"),
        ({"a": [1, 2]}, '{"a":[1,2]}'),
        (Hit(title="t", score=0.5), '{"title":"t","score":0.5}'),
        ([Hit(title="t", score=1)], '[{"title":"t","score":1.0}]'),
        (Pair(1, "x"), '{"a":1,"b":"x"}'),
        (Opaque(), "<opaque>"),
    ],
)
def test_values_are_rendered_for_the_model(value: Any, text: str) -> None:
    assert render(value) == text
    outcome = outcome_of_return(value)
    assert outcome == ToolOutcome(content=text, output=value)


def test_value_with_update() -> None:
    update = ContextUpdate().set("k", 1)
    assert outcome_of_return(("done", update)) == ToolOutcome("done", output="done", update=update)


def test_tool_result_with_update_keeps_the_error_flag() -> None:
    update = ContextUpdate().append("log", "x")
    outcome = outcome_of_return((ToolResult("nope", is_error=True), update))
    assert outcome == ToolOutcome("nope", is_error=True, output="nope", update=update)


def test_two_tuples_without_an_update_are_plain_values() -> None:
    assert outcome_of_return((1, 2)).content == "[1,2]"


def test_legacy_update_dict_becomes_set_operations_and_is_hidden_from_the_model() -> None:
    outcome = outcome_of_return({"result": "ok", LEGACY_UPDATE_KEY: {"user": {"id": 7}, "n": 1}})
    assert outcome.content == '{"result":"ok"}'
    assert outcome.update == ContextUpdate().set("user", {"id": 7}).set("n", 1)
    assert not outcome.is_error


def test_legacy_update_that_is_not_a_mapping_is_an_error_result() -> None:
    outcome = outcome_of_return({LEGACY_UPDATE_KEY: ["not", "a", "mapping"]})
    assert outcome.is_error
    assert LEGACY_UPDATE_KEY in outcome.content


def test_legacy_update_with_a_bad_key_is_an_error_result() -> None:
    outcome = outcome_of_return({LEGACY_UPDATE_KEY: {"": 1}})
    assert outcome.is_error
    assert outcome.content.startswith("InvalidUpdateError")


def test_pending_is_a_request_not_a_result() -> None:
    request = Request(kind="input", prompt="Which?")
    assert outcome_of_return(Pending(request)).pending == request


def test_errors_carry_type_and_message_only() -> None:
    assert outcome_of_error(ValueError("bad value")) == ToolOutcome("ValueError: bad value", True)
    assert outcome_of_error(KeyError()) == ToolOutcome("KeyError", True)
    assert outcome_of_error(Cancelled("user left")).content == "Tool was cancelled: user left"
    assert outcome_of_error(TimeoutError(), timeout=1.5).content == "Tool timed out after 1.5 s"


# -- end to end: what the model sees and what the metadata becomes -------------------------------


@tool
def plain_value() -> dict[str, int]:
    """A value."""
    return {"n": 1}


@tool
def with_update() -> tuple[str, ContextUpdate]:
    """A value and an update."""
    return "saved", ContextUpdate().set("saved", True).append("history", "with_update")


@tool
def explicit_error() -> ToolResult:
    """An error without raising."""
    return ToolResult("file not found", is_error=True)


@tool
def legacy() -> dict[str, Any]:
    """The seeds' shape."""
    return {"status": "ok", LEGACY_UPDATE_KEY: {"legacy": "yes"}}


@tool
def bad_update() -> tuple[str, ContextUpdate]:
    """An update that cannot apply: append to a string."""
    return "x", ContextUpdate().append("name", "y")


TOOLS = [plain_value, with_update, explicit_error, legacy, bad_update]


def _script() -> list[Any]:
    return [
        [call(t.name) for t in TOOLS],
        "done",
    ]


def _check(messages: Any, metadata: Any) -> None:
    results = {r.tool_name: r for r in tool_results(messages)}
    assert (results["plain_value"].content, results["plain_value"].is_error) == ('{"n":1}', False)
    assert (results["with_update"].content, results["with_update"].is_error) == ("saved", False)
    assert (results["explicit_error"].content, results["explicit_error"].is_error) == (
        "file not found",
        True,
    )
    assert results["legacy"].content == '{"status":"ok"}'
    assert results["bad_update"].is_error
    assert "context update failed" in results["bad_update"].content
    assert dict(metadata) == {
        "name": "n",
        "saved": True,
        "history": ("with_update",),  # a frozen snapshot
        "legacy": "yes",
    }


def test_return_shapes_through_a_runtime() -> None:
    with Runtime() as rt:
        ref = rt.spawn(
            Agent("shapes", model=ScriptedModel(_script()), tools=TOOLS), metadata={"name": "n"}
        )
        result = ref.run("go")
    assert result.output == "done"
    _check(result.messages, result.metadata)


def test_return_shapes_through_the_sync_driver() -> None:
    driver = SyncDriver(
        Agent("shapes", model=ScriptedModel(_script()), tools=TOOLS), metadata={"name": "n"}
    )
    result = driver.run("go")
    _check(result.messages, result.metadata)
