"""JSON given on the command line."""

from __future__ import annotations

import json
from typing import Any

from actors.cli._errors import CliError

__all__ = ["json_object"]


def json_object(text: str | None, option: str) -> dict[str, Any] | None:
    """Parse the JSON object given to ``option``; None when the option was not given.

    Raises:
        CliError: The text is not JSON, or not an object.
    """
    if text is None:
        return None
    hint = f"""write {option} '{{"key": "value"}}' (a JSON object, in single quotes)"""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"{option} is not valid JSON: {exc.msg} at {exc.pos}", hint, code=2
        ) from None
    if not isinstance(value, dict):
        raise CliError(f"{option} must be a JSON object, got {type(value).__name__}", hint, code=2)
    return value
