"""The agent's structured output: how it is offered to the model and validated."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from actors.models._model import FINAL_RESULT_TOOL, ToolDefinition

__all__ = ["FINAL_RESULT_TOOL", "OutputSchema"]


class OutputSchema:
    """Validates final answers against an agent's ``output_type``.

    A pydantic model is offered as-is as the final-result tool's arguments; any other type is
    wrapped in ``{"result": ...}`` because tool arguments must be a JSON object.
    """

    def __init__(self, output_type: type[Any]) -> None:
        self.output_type = output_type
        self.wrapped = not (isinstance(output_type, type) and issubclass(output_type, BaseModel))
        self._adapter: TypeAdapter[Any] = TypeAdapter(output_type)
        schema = self._adapter.json_schema()
        if self.wrapped:
            # "$ref"s point at "#/$defs/...": the definitions must stay at the root.
            defs = schema.pop("$defs", None)
            schema = {"type": "object", "properties": {"result": schema}, "required": ["result"]}
            if defs:
                schema["$defs"] = defs
        schema.pop("title", None)
        self.json_schema: dict[str, Any] = self._adapter.json_schema()
        """The schema of a final answer given as JSON text (unwrapped)."""
        self.tool = ToolDefinition(
            FINAL_RESULT_TOOL, "Give the final answer. Call this exactly once, at the end.", schema
        )

    def from_arguments(self, arguments: dict[str, Any]) -> Any:
        """Validate final-result tool arguments (raises `ValidationError`)."""
        if self.wrapped:
            if set(arguments) != {"result"}:
                return self._adapter.validate_python(arguments.get("result", arguments))
            return self._adapter.validate_python(arguments["result"])
        return self._adapter.validate_python(arguments)

    def from_text(self, text: str) -> Any:
        """Validate a plain-text answer: JSON first, then the raw text for string-like types."""
        try:
            return self._adapter.validate_json(_strip_fence(text))
        except ValidationError:
            if self.output_type is str:
                return text
            try:  # unquoted text for a Literal of strings, ``str | None``, ...
                return self._adapter.validate_python(text.strip(), strict=True)
            except ValidationError:
                pass
            raise


def _strip_fence(text: str) -> str:
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.split("\n", 1)[1] if "\n" in stripped else ""
        stripped = stripped.rsplit("```", 1)[0]
    return stripped.strip() or json.dumps(text)
