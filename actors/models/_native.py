"""Native structured output: an answer's JSON schema, shaped for a provider to enforce.

Providers that constrain a reply to a schema (OpenAI's ``response_format`` of type
``json_schema``, a tool Anthropic is forced to call) need an object at the schema's root;
an answer of another type (a number, a list, a union) is wrapped as ``{"result": ...}`` on the
way out and unwrapped on the way back, so the agent loop sees the answer it asked for.
OpenAI's strict mode holds a reply to the schema exactly, but accepts only closed objects whose
properties are all required: `native_schema` closes the objects and says whether the schema
can be strict; when it cannot (an optional field, a free-form mapping), it is sent unstrict.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from actors.context._messages import AssistantMessage
from actors.models._arguments import INVALID_ARGUMENTS_KEY
from actors.models._model import FINAL_RESULT_TOOL, ModelRequest, ModelResponse, ModelSettings

__all__ = [
    "WRAP_KEY",
    "NativeSchema",
    "native_mode",
    "native_schema",
    "text_answer",
    "unwrap_text",
]

WRAP_KEY = "result"


@dataclass(frozen=True, slots=True)
class NativeSchema:
    """A schema ready for a provider: an object at the root, its objects closed."""

    schema: dict[str, Any]
    wrapped: bool  # the answer is the ``result`` property of what the model sends
    strict: bool  # every object is closed and requires all its properties


def native_mode(request: ModelRequest, settings: ModelSettings) -> str | None:
    """How native output applies to ``request``: ``"text"``, ``"tool"`` or None (it does not).

    ``"text"``: the agent wants its answer as JSON text (an output type, no tools).
    ``"tool"``: a tools agent answers through the ``final_result`` tool.
    """
    if not settings.get("native_output"):
        return None
    if any(tool.name == FINAL_RESULT_TOOL for tool in request.tools):
        return "tool"
    if request.output_schema is not None and not request.tools:
        return "text"
    return None


def native_schema(schema: dict[str, Any]) -> NativeSchema:
    """``schema`` with an object at its root and its objects closed (a deep copy)."""
    out = copy.deepcopy(schema)
    wrapped = out.get("type") != "object"
    if wrapped:
        definitions = out.pop("$defs", None)  # "$ref"s point at "#/$defs/...": keep them at root
        out = {"type": "object", "properties": {WRAP_KEY: out}, "required": [WRAP_KEY]}
        if definitions:
            out["$defs"] = definitions
    out.pop("title", None)
    strict = _close(out)
    if strict:
        _drop_defaults(out)
    return NativeSchema(out, wrapped, strict)


def _close(node: Any) -> bool:
    """Close every object schema under ``node``; whether all of them can be strict."""
    strict = True
    if isinstance(node, dict):
        if node.get("type") == "object" or "properties" in node:
            extra = node.get("additionalProperties")
            if extra is None:
                node["additionalProperties"] = False
            elif extra is not False:
                strict = False  # a free-form mapping: no strict schema can describe it
            if set(node.get("required", ())) != set(node.get("properties", {})):
                strict = False  # an optional property: strict mode requires them all
        for value in node.values():
            strict = _close(value) and strict
    elif isinstance(node, list):
        for item in node:
            strict = _close(item) and strict
    return strict


def _drop_defaults(node: Any) -> None:
    # Every property is required in a strict schema: a default could never apply.
    if isinstance(node, dict):
        node.pop("default", None)
        for value in node.values():
            _drop_defaults(value)
    elif isinstance(node, list):
        for item in node:
            _drop_defaults(item)


def unwrap_text(text: str, wrapped: bool) -> str:
    """The answer text out of a wrapped reply; any other text as it came."""
    if not wrapped:
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return text  # not JSON: the loop tells the model what was wrong
    if isinstance(value, dict) and set(value) == {WRAP_KEY}:
        return json.dumps(value[WRAP_KEY], ensure_ascii=False)
    return text


def text_answer(response: ModelResponse, wrapped: bool) -> ModelResponse:
    """A reply whose forced ``final_result`` call carries the answer, as a text answer."""
    message = response.message
    call = next((c for c in message.tool_calls if c.name == FINAL_RESULT_TOOL), None)
    if call is None:
        return response
    value: Any = call.arguments
    if set(value) == {INVALID_ARGUMENTS_KEY}:
        content = str(value[INVALID_ARGUMENTS_KEY])  # as the model wrote it: the loop says why
    else:
        if wrapped and set(value) == {WRAP_KEY}:
            value = value[WRAP_KEY]
        content = json.dumps(value, ensure_ascii=False)
    return ModelResponse(
        message=AssistantMessage(content=content),
        usage=response.usage,
        model_name=response.model_name,
        finish_reason="stop",
    )
