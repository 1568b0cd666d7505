from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from pydantic import TypeAdapter, ValidationError

from actors import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

from .helpers import messages

adapter: TypeAdapter[Message] = TypeAdapter(Message)


def test_role_picks_the_message_type() -> None:
    assert adapter.validate_python({"role": "system", "content": "s"}) == SystemMessage(content="s")
    assert adapter.validate_python({"role": "user", "content": "u"}) == UserMessage(content="u")
    assert adapter.validate_python({"role": "assistant"}) == AssistantMessage()
    assert adapter.validate_python(
        {"role": "tool", "tool_call_id": "c1", "tool_name": "t", "content": "r"}
    ) == ToolResultMessage(tool_call_id="c1", tool_name="t", content="r")


def test_unknown_role_is_rejected() -> None:
    with pytest.raises(ValidationError, match="role"):
        adapter.validate_python({"role": "robot", "content": "x"})


@pytest.mark.parametrize(
    "message",
    [
        SystemMessage(content="s"),
        UserMessage(content="u"),
        AssistantMessage(content="a", tool_calls=(ToolCall(id="c", name="t"),)),
        ToolResultMessage(tool_call_id="c", tool_name="t", content="r", is_error=True),
        ToolCall(id="c", name="t", arguments={"q": "x"}),
    ],
)
def test_messages_are_frozen(message: Any) -> None:
    field = next(iter(type(message).model_fields))
    with pytest.raises(ValidationError, match="frozen"):
        setattr(message, field, "changed")


def test_unknown_fields_are_rejected() -> None:
    with pytest.raises(ValidationError, match="extra"):
        UserMessage(content="u", timestamp=3)  # type: ignore[call-arg]


def test_assistant_defaults_to_no_text_and_no_calls() -> None:
    message = AssistantMessage()
    assert (message.content, message.tool_calls) == ("", ())


def test_tool_calls_become_a_tuple() -> None:
    call = ToolCall(id="c", name="t")
    message = AssistantMessage(tool_calls=[call])  # type: ignore[arg-type]
    assert message.tool_calls == (call,)


def test_tool_call_arguments_are_plain_json() -> None:
    call = ToolCall(id="c", name="t", arguments={"xs": (1, 2), "nested": {"k": (3,)}})
    # Stored in the form the log keeps, so a message rebuilt from the log equals it.
    assert call.arguments == {"xs": [1, 2], "nested": {"k": [3]}}


@pytest.mark.parametrize("bad", [{"s": {1, 2}}, {"o": object()}, {"f": float("nan")}])
def test_tool_call_arguments_that_are_not_json_are_rejected(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match="not JSON-serializable"):
        ToolCall(id="c", name="t", arguments=bad)


def test_tool_call_arguments_are_copied() -> None:
    arguments: dict[str, Any] = {"xs": [1]}
    call = ToolCall(id="c", name="t", arguments=arguments)
    arguments["xs"].append(2)
    assert call.arguments == {"xs": [1]}


@settings(max_examples=50, deadline=None)
@given(messages)
def test_json_roundtrip(message: Message) -> None:
    assert adapter.validate_json(adapter.dump_json(message)) == message
    assert adapter.validate_python(message.model_dump(mode="json")) == message
