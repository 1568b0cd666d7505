"""The messages of a transcript.

System, user, assistant (with tool calls) and tool result: frozen pydantic models, one
discriminated union.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator

from actors._text import Text, clean_text
from actors.context._json import JsonError, json_copy
from actors.context._parts import Part, TextPart, content_text
from actors.context._unchecked import SetFields, unchecked

__all__ = [
    "AssistantMessage",
    "Message",
    "SystemMessage",
    "ToolCall",
    "ToolResultMessage",
    "UserMessage",
    "message_adapter",
    "tool_result",
    "user_message",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolCall(_Frozen):
    """One call of a tool that the model asked for.

    Attributes:
        id: The provider's id of the call; a tool result answers it by this id.
        name: The tool's name.
        arguments: The arguments as the model gave them (a JSON object).
    """

    id: Text
    name: Text
    arguments: dict[str, Any] = Field(default_factory=dict)

    @field_validator("arguments")
    @classmethod
    def _plain_json(cls, arguments: dict[str, Any]) -> dict[str, Any]:
        # The log stores the JSON form; a tuple or a set here would make the live message differ
        # from the one rebuilt from the log.
        try:
            return json_copy(arguments, "arguments")  # type: ignore[no-any-return]
        except JsonError as exc:
            raise ValueError(str(exc)) from None


class SystemMessage(_Frozen):
    """Instructions for the model."""

    role: Literal["system"] = "system"
    content: Text

    @property
    def text(self) -> str:
        """The instructions (the same as ``content``)."""
        return self.content


def _parts_input(value: Any) -> Any:
    # A str in a sequence is a TextPart; one part alone is a sequence of one.
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return (value,)
    if isinstance(value, list | tuple):
        if not value:
            raise ValueError("content is an empty sequence; give text or parts")
        return tuple(TextPart(text=item) if isinstance(item, str) else item for item in value)
    return value


class UserMessage(_Frozen):
    """A message from the user (or from a parent agent handing down a task).

    Attributes:
        content: Text, or a sequence of parts (`TextPart`, `ImagePart`, `AudioPart`,
            `DocumentPart`; a str in the sequence is a `TextPart`).
    """

    role: Literal["user"] = "user"
    content: Text | tuple[Part, ...]

    _content = field_validator("content", mode="before")(_parts_input)

    @property
    def text(self) -> str:
        """The message's text: its content, or its text parts joined by newlines."""
        return content_text(self.content)


class AssistantMessage(_Frozen):
    """A reply of the model: text, tool calls, or both."""

    role: Literal["assistant"] = "assistant"
    content: Text = ""
    tool_calls: tuple[ToolCall, ...] = ()

    @property
    def text(self) -> str:
        """The reply's text (the same as ``content``)."""
        return self.content


class ToolResultMessage(_Frozen):
    """The result of one tool call, as the model will read it."""

    role: Literal["tool"] = "tool"
    tool_call_id: Text
    tool_name: Text
    content: Text | tuple[Part, ...]
    is_error: bool = False

    _content = field_validator("content", mode="before")(_parts_input)

    @property
    def text(self) -> str:
        """The result's text: its content, or its text parts joined by newlines."""
        return content_text(self.content)


Message = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolResultMessage,
    Field(discriminator="role"),
]
"""Any message of a transcript; the ``role`` field tells which."""

message_adapter: TypeAdapter[Message] = TypeAdapter(Message)

_CONTENT = SetFields({"content"})
_RESULT_FIELDS = SetFields({"tool_call_id", "tool_name", "content", "is_error"})


def user_message(content: str | tuple[Part, ...]) -> UserMessage:
    """``UserMessage(content=content)``, without validating a string again."""
    if type(content) is not str or not content.isascii():  # the text rule, in the validator
        return UserMessage(content=content)
    return unchecked(UserMessage, {"role": "user", "content": content}, _CONTENT)


def tool_result(
    tool_call_id: str, tool_name: str, content: str | tuple[Part, ...], is_error: bool
) -> ToolResultMessage:
    """``ToolResultMessage(...)`` with every field given, without validating them again."""
    if not (
        type(tool_call_id) is str
        and type(tool_name) is str
        and type(content) is str
        and type(is_error) is bool
        # The text rule for the rest: an id and a name come from a checked call already.
        and (content.isascii() or content is clean_text(content))
    ):
        return ToolResultMessage(
            tool_call_id=tool_call_id, tool_name=tool_name, content=content, is_error=is_error
        )
    values = {
        "role": "tool",
        "tool_call_id": tool_call_id,
        "tool_name": tool_name,
        "content": content,
        "is_error": is_error,
    }
    return unchecked(ToolResultMessage, values, _RESULT_FIELDS)
