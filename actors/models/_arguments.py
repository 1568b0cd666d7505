"""Tool-call arguments as providers send them (JSON text) turned into a `ToolCall`'s dict."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["INVALID_ARGUMENTS_KEY", "parse_arguments"]

INVALID_ARGUMENTS_KEY = "__actors_invalid_arguments__"
"""The only key of a tool call's arguments when the model's text was not a JSON object.

Its value is the model's text, unchanged. No tool has a parameter of that name, so the call
fails validation like any other bad call, and the agent loop can tell the model that its
arguments were not a JSON object and show it what it sent.
"""


def parse_arguments(text: str) -> dict[str, Any]:
    """Parse a tool call's arguments; empty text means no arguments.

    Text that is not a JSON object comes back as ``{INVALID_ARGUMENTS_KEY: text}`` rather
    than raising: a model that writes bad arguments is a tool-call error the model can fix on
    its next turn, not a failed request.
    """
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return {INVALID_ARGUMENTS_KEY: text}
    if not isinstance(value, dict):
        return {INVALID_ARGUMENTS_KEY: text}
    return value
