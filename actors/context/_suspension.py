"""Suspension: `Pending`, `Request` and `Answer`.

A tool returns `Pending` with a `Request` for the host; the host's `Answer` resumes the run and
the tool is called again with it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from actors._text import Text
from actors.context._json import JsonError, json_copy

__all__ = ["Answer", "Pending", "Request"]


class Request(BaseModel):
    """A question a tool puts to the host (a person, an approver, an auth flow).

    Attributes:
        kind: What is asked: ``"input"``, ``"approval"``, ``"authorization"`` or any string.
        prompt: The question, for a person to read.
        data: Anything the host needs to answer (plain JSON).
        id: Unique and stable (it survives serialization). Filled in by the agent when empty.
        agent_id: The agent that owns the request; filled in by the agent.
        path: The ids from the root agent down to the owner; filled in as the request surfaces.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Text = "input"
    prompt: Text = ""
    data: Any = None
    id: str = ""
    agent_id: str = ""
    path: tuple[str, ...] = ()

    @field_validator("data")
    @classmethod
    def _plain_json(cls, data: Any) -> Any:
        # The request is logged (and stored) with the suspension: refuse what could not be
        # written or read back here, in the tool that made it, not later in the agent.
        try:
            return json_copy(data, "data")
        except JsonError as exc:
            raise ValueError(f"{exc}; a request's data is plain JSON") from None


class Pending(BaseModel):
    """What a tool returns instead of a result when it must wait for the host.

    The agent parks the call, the request surfaces to the host, and when the host answers, the
    same tool is called again with the same arguments and ``ctx.answer`` set.

    Example:
        >>> Pending(Request(kind="input", prompt="Which city?")).request.kind
        'input'
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    request: Request

    def __init__(self, request: Request | None = None, /, **data: Any) -> None:
        if request is not None:
            data["request"] = request
        super().__init__(**data)


class Answer(BaseModel):
    """The host's answer to a `Request`.

    Attributes:
        ok: Yes or no: approved, or rejected / declined.
        data: What was given (the input asked for, a token, ...).
        reason: Why, for a rejection; shown to the model.
        arguments: For an approval, edited arguments to run the tool with instead (validated
            again).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    ok: bool = True
    data: Any = None
    reason: Text | None = None
    arguments: dict[str, Any] | None = Field(default=None)
