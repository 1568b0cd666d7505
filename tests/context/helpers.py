"""Shared helpers of the context tests: a fake clock and hypothesis strategies."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from actors import (
    AssistantMessage,
    ContextUpdate,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

START = datetime(2025, 1, 1, tzinfo=UTC)


class FakeClock:
    """A deterministic clock: each call returns the next second after ``start``."""

    def __init__(self, start: datetime = START, step: timedelta = timedelta(seconds=1)) -> None:
        self.now = start
        self.step = step
        self.calls = 0

    def __call__(self) -> datetime:
        now = self.now
        self.now += self.step
        self.calls += 1
        return now

    def tick(self, n: int) -> datetime:
        """The time the clock returned (or will return) on call number ``n`` (0-based)."""
        return START + n * self.step


# -- JSON values ----------------------------------------------------------------------------

KEYS = st.sampled_from(["a", "b", "c"])
"""Few keys, so random operations collide on them."""

scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=3)
json_values: st.SearchStrategy[Any] = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=6,
)
json_dicts: st.SearchStrategy[dict[str, Any]] = st.dictionaries(KEYS, json_values, max_size=3)

# -- messages -------------------------------------------------------------------------------

_text = st.text(alphabet="abc xyz", max_size=5)
_call_ids = st.sampled_from(["c1", "c2", "c3"])
tool_calls = st.builds(
    ToolCall,
    id=_call_ids,
    name=st.sampled_from(["search", "write"]),
    arguments=st.dictionaries(KEYS, scalars, max_size=2),
)
messages: st.SearchStrategy[Message] = st.one_of(
    st.builds(SystemMessage, content=_text),
    st.builds(UserMessage, content=_text),
    st.builds(
        AssistantMessage,
        content=_text,
        tool_calls=st.lists(tool_calls, max_size=2).map(tuple),
    ),
    st.builds(
        ToolResultMessage,
        tool_call_id=_call_ids,
        tool_name=st.just("search"),
        content=_text,
        is_error=st.booleans(),
    ),
)

# -- ContextUpdate operations and a reference model of their meaning ------------------------


class RefError(Exception):
    pass


def ref_merge(current: Any, incoming: dict[str, Any]) -> Any:
    if not isinstance(current, dict):
        return copy.deepcopy(incoming)
    for key, value in incoming.items():
        if isinstance(value, dict) and isinstance(current.get(key), dict):
            current[key] = ref_merge(current[key], value)
        else:
            current[key] = copy.deepcopy(value)
    return current


def ref_fold(state: dict[str, Any], ops: list[tuple[str, str, Any]]) -> dict[str, Any]:
    """The semantics as the issue states them, on a private deep copy mutated in place."""
    out = copy.deepcopy(state)
    for kind, key, value in ops:
        if kind == "set":
            out[key] = copy.deepcopy(value)
        elif kind == "merge":
            out[key] = ref_merge(out.get(key), value)
        elif kind == "append":
            if out.get(key) is None:
                out[key] = [copy.deepcopy(value)]
            elif isinstance(out[key], list):
                out[key].append(copy.deepcopy(value))
            else:
                raise RefError
        elif kind == "increment":
            current = out.get(key)
            if current is None:
                out[key] = value
            elif isinstance(current, bool) or not isinstance(current, int | float):
                raise RefError
            else:
                out[key] = current + value
        elif kind == "delete":
            out.pop(key, None)
        # log_event, send: no metadata
    return out


json_mappings = st.dictionaries(KEYS, json_values, max_size=3)
operations = st.one_of(
    st.tuples(st.just("set"), KEYS, json_values),
    st.tuples(st.just("merge"), KEYS, json_mappings),
    st.tuples(st.just("append"), KEYS, json_values),
    st.tuples(st.just("increment"), KEYS, st.integers(-3, 3)),
    st.tuples(st.just("delete"), KEYS, st.none()),
    st.tuples(st.just("log_event"), st.just("app.note"), json_mappings),
    st.tuples(st.just("send"), st.sampled_from(["peer-a", "peer-b"]), st.text(max_size=4)),
)


def build_update(ops: list[tuple[str, str, Any]]) -> ContextUpdate:
    update = ContextUpdate()
    for kind, key, value in ops:
        if kind == "delete":
            update = update.delete(key)
        elif kind == "log_event":
            update = update.log_event(key, value)
        elif kind == "send":
            update = update.send(key, value)
        else:
            update = getattr(update, kind)(key, value)
    return update
