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

    Tuples become lists. Raises `JsonError` naming the first offending path (a container that
    contains itself is not JSON either).
    """
    return _copy(value, path, set())


def _copy(value: Any, path: str, open_containers: set[int]) -> Any:
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise JsonError(path, value)
        return value
    if not isinstance(value, Mapping | list | tuple):
        raise JsonError(path, value)
    # A cycle would otherwise end in a RecursionError instead of a typed error.
    if id(value) in open_containers:
        raise JsonError(f"{path} (a cycle)", value)
    open_containers.add(id(value))
    try:
        if isinstance(value, Mapping):
            out: dict[str, Any] = {}
            for key, item in value.items():
                if not isinstance(key, str):
                    raise JsonError(f"{path} key {key!r}", key)
                out[key] = _copy(item, f"{path}[{key!r}]", open_containers)
            return out
        return [_copy(item, f"{path}[{i}]", open_containers) for i, item in enumerate(value)]
    finally:
        open_containers.discard(id(value))
