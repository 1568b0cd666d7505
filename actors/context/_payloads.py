"""What each framework event carries: checked whenever a log comes from outside the agent.

The agent loop, crash recovery and `Runtime.restore` read fields of bookkeeping events (a
``subagent_spawned``'s ``child_id``, a ``suspended`` event's request, ...). A log read back
from a store or a blob, or an event a caller appends with `AgentContext.log_event`, is checked
here first, so that whatever is accepted can later be replayed, recovered and restored, and
what cannot is refused with the event's index and type instead of a ``KeyError`` deep inside a
restore.

Only the fields the library reads are checked; others pass through (a newer library may have
written more). User events (namespaced, like ``app.note``) carry any plain JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)

from actors.context._events import COMPACTED, REPLACE, SURFACE_TYPES
from actors.context._json import MAX_WRAPPED_DEPTH, depth_exceeds
from actors.context._messages import Message, ToolCall, message_adapter
from actors.context._parts import Part
from actors.context._suspension import Request
from actors.context._update import ContextUpdate
from actors.context._usage import Usage
from actors.exceptions import InvalidUpdateError

__all__ = ["PayloadError", "check_payload"]


class PayloadError(ValueError):
    """An event's data lacks what its type must carry; the message says what."""


class _Payload(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class _RunScoped(_Payload):
    run_id: StrictStr | None = None


class _StepStart(_Payload):
    iteration: StrictInt | None = None


class _ToolCallEvent(_Payload):
    tool_call_id: StrictStr
    name: StrictStr


class _SubagentSpawned(_Payload):
    child_id: StrictStr = Field(min_length=1)
    name: StrictStr | None = None
    tool_call_id: StrictStr | None = None
    keep: StrictBool = False
    delegated: StrictBool = False
    continued: StrictBool = False

    @model_validator(mode="after")
    def _kept_child_has_a_name(self) -> _SubagentSpawned:
        # A kept child is found again by its subagent's name.
        if self.keep and self.name is None:
            raise ValueError("a kept child ('keep': true) needs the subagent's 'name'")
        return self


class _SubagentFinished(_Payload):
    child_id: StrictStr = Field(min_length=1)


class _OpenRequest(Request):
    id: StrictStr = Field(min_length=1)


class _Suspended(_Payload):
    request: _OpenRequest
    tool_call: ToolCall
    approval: StrictBool = False


class _Resumed(_Payload):
    request_id: StrictStr


class _Steered(_Payload):
    content: StrictStr | tuple[Part, ...]  # text, or parts' JSON: read back into a message


class _MessageReceived(_Payload):
    sender: StrictStr = Field(alias="from")
    content: StrictStr | tuple[Part, ...]


class _Amount(_Payload):
    requests: StrictInt = Field(ge=0)
    input_tokens: StrictInt = Field(ge=0)
    output_tokens: StrictInt = Field(ge=0)
    nano_usd: StrictInt = Field(ge=0)


class _BudgetSet(_Payload):
    budget: dict[str, Any]


class _BudgetReserved(_Amount):
    run_id: StrictStr
    step: StrictInt


class _Settlement(_Payload):
    reserved: _Amount
    spent: _Amount


class _BudgetSettled(_Settlement):
    run_id: StrictStr
    step: StrictInt


class _RequestHeader(_Payload):
    budget: _Amount | None = None  # a budgeted request's reservation


class _StepEnd(_Payload):
    budget: _Settlement | None = None  # a budgeted request's settlement


_SHAPES: dict[str, type[_Payload]] = {
    "turn_start": _RunScoped,
    "turn_end": _RunScoped,
    "cancelled": _RunScoped,
    "recovered": _RunScoped,
    "step_start": _StepStart,
    "tool_call": _ToolCallEvent,
    "subagent_spawned": _SubagentSpawned,
    "subagent_finished": _SubagentFinished,
    "suspended": _Suspended,
    "resumed": _Resumed,
    "steered": _Steered,
    "message_received": _MessageReceived,
    "budget_set": _BudgetSet,
    "budget_reserved": _BudgetReserved,
    "budget_settled": _BudgetSettled,
    "request_header": _RequestHeader,
    "step_end": _StepEnd,
}


def _run_id_ok(data: Mapping[str, Any]) -> bool:
    return type(data.get("run_id", "")) is str or data.get("run_id") is None


# The payloads of most events of a log, checked without pydantic when they are well formed (a
# log of 10,000 events is read a tenth faster); the models above say what is wrong otherwise.
_QUICK: dict[str, Callable[[Mapping[str, Any]], bool]] = {
    "tool_call": lambda d: type(d.get("tool_call_id")) is str and type(d.get("name")) is str,
    "step_start": lambda d: type(d.get("iteration", 0)) is int,
    "turn_start": _run_id_ok,
    "turn_end": _run_id_ok,
    "request_header": lambda d: "budget" not in d,
    "step_end": lambda d: "budget" not in d,
}


_NOT_MESSAGE = frozenset({"source", "pin"})  # a surface event's data beside its message


def check_payload(
    event_type: str, data: Mapping[str, Any]
) -> tuple[Message | None, ContextUpdate | None]:
    """Check that ``data`` is what an event of ``event_type`` carries.

    Returns the message a surface or ``replace`` event holds, or the update a
    ``context_update`` holds (parsed once, for the caller to reuse), else ``(None, None)``.

    Raises:
        PayloadError: The data lacks a field the library reads, has one of the wrong type, or
            nests deeper than the library keeps.
    """
    if depth_exceeds(data, MAX_WRAPPED_DEPTH):
        raise PayloadError(f"its data nests more than {MAX_WRAPPED_DEPTH} levels deep")
    try:
        if event_type in SURFACE_TYPES:
            if "source" in data or "pin" in data:
                if "source" in data and not isinstance(data["source"], str):
                    raise PayloadError(f"'source' must be a string, got {data['source']!r}")
                if "pin" in data and type(data["pin"]) is not bool:
                    raise PayloadError(f"'pin' must be a bool, got {data['pin']!r}")
                data = {key: value for key, value in data.items() if key not in _NOT_MESSAGE}
            return message_adapter.validate_python(data), None
        if event_type in (REPLACE, COMPACTED):
            for bound in ("first", "last"):
                if type(data.get(bound)) is not int:
                    raise PayloadError(f"{bound!r} must be an int, got {data.get(bound)!r}")
            kept = data.get("kept", [])
            if not isinstance(kept, list) or any(type(k) is not int for k in kept):
                raise PayloadError(f"'kept' must be a list of ints, got {kept!r}")
            return message_adapter.validate_python(data.get("message")), None
        if event_type == "context_update":
            if "source" in data and not isinstance(data["source"], str):
                raise PayloadError(f"'source' must be a string, got {data['source']!r}")
            return None, ContextUpdate.from_json(data.get("ops"))
        if event_type == "usage":
            if "cost" in data:  # the log's costs are in budget events; a usage event has none
                raise PayloadError("a usage event carries no 'cost' (budget events do)")
            Usage.model_validate(data)
        elif (shape := _SHAPES.get(event_type)) is not None:
            quick = _QUICK.get(event_type)
            if quick is None or not quick(data):
                shape.model_validate(data)
    except ValidationError as exc:
        raise PayloadError(first_error(exc)) from None
    except InvalidUpdateError as exc:
        raise PayloadError(str(exc)) from None
    return None, None


def first_error(exc: ValidationError) -> str:
    """The first problem pydantic found, as ``where: what``."""
    err = exc.errors()[0]
    where = ".".join(str(part) for part in err.get("loc", ())) or "value"
    return f"{where}: {err.get('msg', 'invalid')}"
