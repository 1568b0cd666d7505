"""How a subagent looks to its parent's model: a tool that takes a task and returns a result."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter, ValidationError

from actors._safe import exception_text
from actors.context._read_only import read_only
from actors.loop._agent import Subagent
from actors.loop._outcome import render
from actors.loop._tools import describe_validation_error
from actors.loop._types import ChildFinished, ToolOutcome
from actors.models._model import ToolDefinition

__all__ = ["child_outcome", "child_tool_context", "subagent_definition", "validate_task"]


def child_tool_context(subagent: Subagent, parent_tool_context: Any) -> Any:
    """The tool_context a child spawned for ``subagent`` gets: the parent's, or narrowed.

    The narrowing function sees the parent's tool_context as tools do (a mapping as a
    read-only view), so it cannot change what the parent holds.

    Raises:
        Exception: whatever the subagent's ``tool_context`` function raised.
    """
    narrow = subagent.tool_context
    if narrow is None:
        return parent_tool_context
    return narrow(read_only(parent_tool_context))


def subagent_definition(subagent: Subagent) -> ToolDefinition:
    """The tool the parent's model calls to hand ``subagent`` a task."""
    properties: dict[str, Any] = {
        "task": {"type": "string", "description": "The task for the subagent, self-contained."}
    }
    required = ["task"]
    defs: dict[str, Any] = {}
    if subagent.input_type is not None:
        schema = TypeAdapter(subagent.input_type).json_schema()
        schema.pop("title", None)
        # "$ref"s point at "#/$defs/...": the definitions must stay at the root.
        defs = schema.pop("$defs", {})
        properties["input"] = schema
        required.append("input")
    description = (
        subagent.description
        or subagent.agent.description
        or f"Hand a task to the {subagent.agent.name!r} agent and get its answer."
    )
    parameters: dict[str, Any] = {"type": "object", "properties": properties, "required": required}
    if defs:
        parameters["$defs"] = defs
    return ToolDefinition(subagent.tool_name, description, parameters)


def validate_task(subagent: Subagent, arguments: dict[str, Any]) -> str | None:
    """Return what is wrong with a subagent call's arguments, or None."""
    task = arguments.get("task")
    if not isinstance(task, str) or not task.strip():
        return f"Subagent {subagent.tool_name!r} needs a non-empty 'task' string."
    extra = sorted(set(arguments) - {"task", "input"})
    if extra:
        return f"Subagent {subagent.tool_name!r} takes 'task' and 'input' only, not {extra}."
    if subagent.input_type is not None:
        try:
            TypeAdapter(subagent.input_type).validate_python(arguments.get("input"))
        except ValidationError as exc:
            return f"Invalid input for subagent {subagent.tool_name!r}: " + (
                describe_validation_error(exc)
            )
    return None


def child_outcome(name: str, message: ChildFinished) -> ToolOutcome:
    """The parent's tool result for a child's run that ended (not suspended)."""
    result, error = message.result, message.error
    if error is not None or result is None:
        cause = exception_text(error) if error is not None else "no result"
        return ToolOutcome(
            f"Subagent {name!r} ({message.child_id}) failed: {cause}", True, output=None
        )
    if result.status == "cancelled":
        return ToolOutcome(f"Subagent {name!r} ({message.child_id}) was cancelled.", True)
    return ToolOutcome(render(result.output), output=result.output)
