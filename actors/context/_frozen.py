"""Deep, read-only views of plain JSON data: what tools see of an agent's metadata."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

__all__ = ["freeze", "thaw"]

_SEQUENCES = (list, tuple)  # a tuple, not a union: it is built once


def freeze(value: Any) -> Any:
    """Return a deep read-only copy: mappings become read-only mappings, lists become tuples."""
    if isinstance(value, Mapping):
        return MappingProxyType({key: freeze(item) for key, item in value.items()})
    if isinstance(value, _SEQUENCES):
        return tuple(freeze(item) for item in value)
    return value


def thaw(value: Any) -> Any:
    """Return a deep mutable copy of ``value`` (the inverse of `freeze`)."""
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, _SEQUENCES):
        return [thaw(item) for item in value]
    return value
