"""Checks that a value is plain JSON, and copies it so a caller's later edits cannot leak in."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from actors._text import clean_text
from actors.context._read_only import ReadOnlyList
from actors.exceptions import UserError

__all__ = [
    "MAX_DEPTH",
    "MAX_WRAPPED_DEPTH",
    "JsonDepthError",
    "JsonError",
    "depth_exceeds",
    "json_copy",
    "plain_metadata",
]

MAX_DEPTH = 200
"""How deeply containers may nest in a value the library keeps (metadata, event data).

Generous for any real document, and far from Python's recursion limit, which every reader
of the value (JSON encoders and decoders, pydantic, deep merges) would otherwise hit with a
`RecursionError` instead of a clear error. (pydantic stops serializing at about 250.)
"""

MAX_WRAPPED_DEPTH = MAX_DEPTH + 8
"""The depth of what holds such values: event data wraps them in a few containers of its own
(an update's ops, a request inside a suspension), and so does the metadata mapping. A value
accepted when it was given is never refused when it is read back or written out."""

_SCALARS = (str, int, bool, type(None))
# What json_copy copies, the exact types first so the common case never reaches an ABC check.
# Read-only views (a RunContext's metadata snapshot hands out mappingproxy and tuples, a
# tool_context view ReadOnlyMapping and ReadOnlyList) copy as the plain JSON they stand for,
# so a tool can read a value, change a copy and write it back.
_CONTAINERS = (dict, list, tuple, Mapping, ReadOnlyList)  # a tuple: isinstance is on a hot path
# What a decoded log holds: only these, so measuring its depth needs no ABC check.
_STORED_CONTAINERS = (dict, list, tuple)


class JsonError(TypeError):
    """The value is not JSON; ``path`` says where inside it."""

    def __init__(self, path: str, value: object) -> None:
        super().__init__(f"{path} is a {type(value).__name__}, which is not JSON-serializable")
        self.path = path


def json_copy(value: Any, path: str = "value", *, max_depth: int = MAX_DEPTH) -> Any:
    """Return a deep copy of ``value`` made only of dict, list, str, int, float, bool and None.

    Tuples become lists, read-only views (a metadata snapshot's mappingproxy, a tool_context
    view) become the plain dicts and lists they show, and strings and keys follow the text rule
    (`clean_text`: a lone surrogate becomes U+FFFD). Raises `JsonError` naming the first
    offending path (a container that contains itself is not JSON either, nor one nested more
    than `MAX_DEPTH` levels deep).
    """
    return _copy(value, path, set(), max_depth)


class JsonDepthError(JsonError):
    """A value nests containers more than `MAX_DEPTH` levels deep."""

    def __init__(self, path: str, limit: int) -> None:
        TypeError.__init__(
            self, f"{path} nests containers more than {limit} levels deep; flatten it"
        )
        self.path = path


def _copy(value: Any, path: str, open_containers: set[int], max_depth: int) -> Any:
    if isinstance(value, str):
        # isascii is O(1): the walk pays the text rule only for strings that may break it.
        return value if value.isascii() else clean_text(value)
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise JsonError(path, value)
        return value
    if not isinstance(value, _CONTAINERS):
        raise JsonError(path, value)
    # A cycle would otherwise end in a RecursionError instead of a typed error.
    if id(value) in open_containers:
        raise JsonError(f"{path} (a cycle)", value)
    if len(open_containers) >= max_depth:
        # Only the outermost path: the full one would be thousands of characters long.
        raise JsonDepthError(path.split("[", 1)[0], max_depth)
    open_containers.add(id(value))
    try:
        if type(value) is dict or isinstance(value, Mapping):
            out: dict[str, Any] = {}
            for key, item in value.items():
                if not isinstance(key, str):
                    raise JsonError(f"{path} key {key!r}", key)
                if not key.isascii():
                    key = clean_text(key)
                out[key] = _copy(item, f"{path}[{key!r}]", open_containers, max_depth)
            return out
        return [
            _copy(item, f"{path}[{i}]", open_containers, max_depth) for i, item in enumerate(value)
        ]
    finally:
        open_containers.discard(id(value))


def depth_exceeds(value: Any, limit: int) -> bool:
    """Whether JSON-like ``value`` nests containers more than ``limit`` levels deep.

    Iterative, one level at a time, so a value far deeper than Python's recursion limit is
    measured too (and a flat one, the common case, in one pass).
    """
    level = [value] if isinstance(value, _STORED_CONTAINERS) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        inner = []
        for container in level:
            for item in container.values() if isinstance(container, dict) else container:
                if isinstance(item, _STORED_CONTAINERS):
                    inner.append(item)
        level = inner
    return False


def plain_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of an agent's initial metadata (None: empty).

    Raises:
        UserError: It is not a mapping of plain JSON (or nests too deeply).
    """
    try:
        copied: dict[str, Any] = json_copy(dict(metadata or {}), "metadata")
    except JsonError as exc:
        raise UserError(f"{exc}; metadata must be plain JSON") from None
    except (TypeError, ValueError):
        raise UserError(
            f"metadata must be a mapping of plain JSON, got {type(metadata).__name__}"
        ) from None
    return copied
