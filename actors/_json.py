"""Checks that a value is plain JSON, and copies it so a caller's later edits cannot leak in."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["JsonError", "json_copy"]

_SCALARS = (str, int, bool, type(None))


class JsonError(TypeError):
    """The value is not JSON; ``path`` says where inside it."""

    def __init__(self, path: str, value: object) -> None:
        super().__init__(f"{path} is a {type(value).__name__}, which is not JSON-serializable")
        self.path = path


def json_copy(value: Any, path: str = "value") -> Any:
    """Return a deep copy of ``value`` made only of dict, list, str, int, float, bool and None.

    Tuples become lists. Raises `JsonError` naming the first offending path.
    """
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise JsonError(path, value)
        return value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise JsonError(f"{path} key {key!r}", key)
            out[key] = json_copy(item, f"{path}[{key!r}]")
        return out
    if isinstance(value, list | tuple):
        return [json_copy(item, f"{path}[{i}]") for i, item in enumerate(value)]
    raise JsonError(path, value)
