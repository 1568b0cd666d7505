"""Turning what a tool returned (or raised) into a `ToolOutcome` for the model."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pydantic_core
from pydantic import BaseModel

from actors._safe import exception_text
from actors.context._json import JsonError, json_copy
from actors.context._parts import BinaryPart, Content, TextPart, coerce_content
from actors.context._suspension import Pending
from actors.context._update import ContextUpdate
from actors.exceptions import Cancelled, InvalidUpdateError, ModelRetry
from actors.loop._tools import RetryRequested, ToolResult
from actors.loop._types import ToolOutcome

__all__ = ["LEGACY_UPDATE_KEY", "outcome_of_error", "outcome_of_return", "render"]

LEGACY_UPDATE_KEY = "__update_context__"

_PARTS = (TextPart, BinaryPart)


def render(value: Any) -> Content:
    """Serialize a tool's value for the model: text as is, parts as parts, the rest as JSON.

    A part (`ImagePart`, `file_part(...)`, ...) or a list or tuple of strs and parts that holds
    at least one part is the result's content as it is.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, _PARTS):
        return coerce_content(value, "a tool's result")
    if (
        isinstance(value, list | tuple)
        and value
        and any(isinstance(item, _PARTS) for item in value)
        and all(isinstance(item, str | TextPart | BinaryPart) for item in value)
    ):
        return coerce_content(value, "a tool's result")
    try:
        if isinstance(value, BaseModel):
            return value.model_dump_json()
        return pydantic_core.to_json(value).decode()
    except pydantic_core.PydanticSerializationError:
        pass
    try:
        # A value read from the tool's read-only views (a metadata snapshot's mappingproxy)
        # shows the model the JSON it stands for; only this slow path pays for the copy.
        return pydantic_core.to_json(json_copy(value)).decode()
    except (JsonError, pydantic_core.PydanticSerializationError):
        return repr(value)  # a tool that worked has not failed


def outcome_of_return(value: Any) -> ToolOutcome:
    """Normalize every return shape a tool may use (see `Tool`)."""
    if isinstance(value, Pending):
        return ToolOutcome(content="", pending=value.request)
    if isinstance(value, ToolOutcome):
        return value
    if isinstance(value, RetryRequested):
        return ToolOutcome(content=value.message, is_error=True, retry=True)
    update: ContextUpdate | None = None
    if isinstance(value, ContextUpdate):  # an update alone: a result of None, never dropped
        value, update = None, value
    elif isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], ContextUpdate):
        value, update = value
    elif isinstance(value, Mapping) and LEGACY_UPDATE_KEY in value:
        legacy = value[LEGACY_UPDATE_KEY]
        if not isinstance(legacy, Mapping):
            return ToolOutcome(
                content=f"{LEGACY_UPDATE_KEY} must be a mapping of keys to values",
                is_error=True,
            )
        update = ContextUpdate()
        try:
            for key, item in legacy.items():
                update = update.set(key, item)
        except InvalidUpdateError as exc:
            return ToolOutcome(content=f"InvalidUpdateError: {exc}", is_error=True)
        value = {k: v for k, v in value.items() if k != LEGACY_UPDATE_KEY}
    if isinstance(value, ToolResult):
        return ToolOutcome(
            content=render(value.output),
            is_error=value.is_error,
            output=value.output,
            update=update,
        )
    return ToolOutcome(content=render(value), output=value, update=update)


def outcome_of_error(exc: BaseException, timeout: float | None = None) -> ToolOutcome:
    """An error outcome the model can act on: the exception's type and message, no traceback."""
    if isinstance(exc, TimeoutError) and timeout is not None:
        return ToolOutcome(content=f"Tool timed out after {timeout:g} s", is_error=True)
    if isinstance(exc, Cancelled):
        return ToolOutcome(content=f"Tool was cancelled: {exc.reason}", is_error=True)
    if isinstance(exc, ModelRetry):
        return ToolOutcome(content=exc.message, is_error=True, retry=True)
    return ToolOutcome(content=exception_text(exc), is_error=True)
