"""Issue 12, finding 4: a user's exception whose ``__str__`` raises never strands a run."""

from __future__ import annotations

from typing import Any

import pytest

from actors import Agent, Answer, Request, Runtime, tool
from actors._safe import exception_message, exception_text, safe_repr
from actors.exceptions import RunFailedError
from actors.testing import FunctionModel, ScriptedModel, call


class Unprintable(Exception):
    """An exception that cannot be turned into text."""

    def __str__(self) -> str:
        raise RuntimeError("no text for you")

    def __repr__(self) -> str:
        raise RuntimeError("no repr either")


class NotAString(Exception):
    def __str__(self) -> Any:
        return 42


def _tool_result(agent: Agent[Any]) -> str:
    with Runtime() as runtime:
        result = runtime.spawn(agent).run("go", timeout=10)
    assert result.output == "done"
    (message,) = [m for m in result.messages if m.role == "tool"]
    assert message.is_error  # type: ignore[union-attr]
    return message.content  # type: ignore[no-any-return]


def test_a_sync_tool_without_a_timeout_raising_an_unprintable_exception_ends_its_call() -> None:
    @tool
    def broken() -> str:
        """Fail badly."""
        raise Unprintable()

    agent = Agent("a", model=ScriptedModel([call("broken"), "done"]), tools=[broken])
    assert _tool_result(agent) == "Unprintable: <str() raised RuntimeError>"


def test_an_async_tool_with_a_timeout_raising_an_unprintable_exception_ends_its_call() -> None:
    @tool(timeout=30)
    async def broken() -> str:
        """Fail badly."""
        raise Unprintable()

    agent = Agent("a", model=ScriptedModel([call("broken"), "done"]), tools=[broken])
    assert _tool_result(agent) == "Unprintable: <str() raised RuntimeError>"


def test_an_exception_whose_str_is_not_a_string_is_reported_too() -> None:
    @tool
    def broken() -> str:
        """Fail oddly."""
        raise NotAString()

    agent = Agent("a", model=ScriptedModel([call("broken"), "done"]), tools=[broken])
    assert _tool_result(agent) == "NotAString: <str() raised TypeError>"


def test_an_approval_handler_raising_an_unprintable_exception_denies() -> None:
    @tool(requires_approval=True)
    def guarded() -> str:
        """Needs approval."""
        return "ran"

    def handler(request: Request) -> Answer:
        raise Unprintable()

    agent = Agent("a", model=ScriptedModel([call("guarded"), "done"]), tools=[guarded])
    with Runtime() as runtime:
        result = runtime.spawn(agent, approval_handler=handler).run("go", timeout=10)
    (message,) = [m for m in result.messages if m.role == "tool"]
    assert "Unprintable: <str() raised RuntimeError>" in message.content
    assert "ran" not in message.content


def test_a_model_raising_an_unprintable_exception_fails_the_run_with_a_typed_error() -> None:
    def model(messages: Any, tools: Any) -> str:
        raise Unprintable()

    with Runtime() as runtime:
        ref = runtime.spawn(Agent("a", model=FunctionModel(model)))
        with pytest.raises(RunFailedError, match=r"Unprintable: <str\(\) raised RuntimeError>"):
            ref.run("go", timeout=10)
        errors = [e for e in ref.context().events if e.type == "error"]
    assert errors[-1].data["message"].startswith("agent 'a': the model failed: Unprintable")


def test_the_guarded_helpers_never_raise() -> None:
    assert exception_message(Unprintable()) == "<str() raised RuntimeError>"
    assert exception_text(ValueError("plain")) == "ValueError: plain"
    assert exception_text(ValueError()) == "ValueError"
    assert safe_repr(Unprintable()) == "<Unprintable: repr() raised RuntimeError>"
