"""The read-only view a mapping tool_context reaches tools as."""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import pytest

from actors.context._read_only import read_only
from actors.exceptions import ToolContextReadOnlyError, UserError


class Connection:
    """Something that must be shared, never copied."""

    def __init__(self) -> None:
        self.queries: list[str] = []

    def query(self, sql: str) -> None:
        self.queries.append(sql)


def deps() -> dict[str, Any]:
    return {
        "api_key": "sk-SECRET",
        "db": Connection(),
        "limits": {"rate": 5, "hosts": ["a", {"port": 1}]},
        "tags": {"x"},
        "pair": (1, {"k": "v"}),
        "plain": (1, 2),
    }


def test_reads_work_as_on_the_mapping() -> None:
    raw = deps()
    view = read_only(raw)
    assert isinstance(view, Mapping)
    assert view == raw
    assert view["api_key"] == "sk-SECRET"
    assert view["limits"]["hosts"][1]["port"] == 1
    assert view.get("missing", 7) == 7
    assert "db" in view
    assert len(view) == len(raw)
    assert list(view) == list(raw)
    assert dict(view)["limits"] == raw["limits"]
    assert view["plain"] is raw["plain"]  # a tuple of plain values is handed over as it is
    assert view["pair"][1] == {"k": "v"}
    assert "x" in view["tags"]
    assert view["tags"] | {"y"} == frozenset({"x", "y"})
    assert list(view["limits"]["hosts"][:1]) == ["a"]
    assert isinstance(view["limits"]["hosts"], Sequence)
    assert isinstance(view["tags"], AbstractSet)


def test_objects_inside_are_handed_over_as_they_are() -> None:
    raw = deps()
    view = read_only(raw)
    assert view["db"] is raw["db"]
    view["db"].query("select 1")  # a connection stays usable: read-only is about the mapping
    assert raw["db"].queries == ["select 1"]


@pytest.mark.parametrize(
    ("write", "where"),
    [
        (lambda v: v.__setitem__("api_key", "x"), "tool_context['api_key']"),
        (lambda v: v.__delitem__("api_key"), "tool_context['api_key']"),
        (lambda v: v.pop("api_key"), "tool_context['api_key']"),
        (lambda v: v.setdefault("new", 1), "tool_context['new']"),
        (lambda v: v.update(api_key="x"), "tool_context "),
        (lambda v: v.clear(), "tool_context "),
        (lambda v: v.popitem(), "tool_context "),
        (lambda v: v["limits"].__setitem__("rate", 6), "tool_context['limits']['rate']"),
        (lambda v: v["limits"]["hosts"].append("b"), "tool_context['limits']['hosts']"),
        (lambda v: v["limits"]["hosts"].__setitem__(0, "b"), "tool_context['limits']['hosts']"),
        (lambda v: v["limits"]["hosts"].sort(), "tool_context['limits']['hosts']"),
        (lambda v: v["limits"]["hosts"][1].update(port=2), "tool_context['limits']['hosts'][1]"),
        (lambda v: v["tags"].add("y"), "tool_context['tags']"),
        (lambda v: v["tags"].discard("x"), "tool_context['tags']"),
        (lambda v: v["pair"][1].__setitem__("k", "w"), "tool_context['pair'][1]['k']"),
    ],
)
def test_every_write_raises_a_typed_error_naming_where(write: Any, where: str) -> None:
    raw = deps()
    snapshot = repr(raw["limits"]), repr(raw["tags"]), repr(raw["pair"]), sorted(raw)
    with pytest.raises(ToolContextReadOnlyError) as info:
        write(read_only(raw))
    assert str(info.value).startswith(where.strip())
    assert "is read-only" in str(info.value)
    assert info.value.path == where.strip()
    assert (repr(raw["limits"]), repr(raw["tags"]), repr(raw["pair"]), sorted(raw)) == snapshot


def test_the_error_is_a_user_error_and_a_type_error() -> None:
    with pytest.raises(UserError):
        read_only({"a": 1})["a"] = 2
    with pytest.raises(TypeError):  # as for any read-only mapping
        read_only({"a": 1})["a"] = 2


def test_augmented_assignment_changes_nothing() -> None:
    raw = {"hosts": ["a"], "tags": {"x"}, "m": {"k": 1}}
    view = read_only(raw)
    hosts, tags, m = view["hosts"], view["tags"], view["m"]
    with pytest.raises(ToolContextReadOnlyError):
        hosts += ["b"]
    with pytest.raises(ToolContextReadOnlyError):
        m |= {"k": 2}
    tags |= {"y"}  # set algebra: a new frozenset bound to the name
    assert raw == {"hosts": ["a"], "tags": {"x"}, "m": {"k": 1}}


def test_reprs_show_keys_never_values() -> None:
    view = read_only(deps())
    text = repr(view) + repr(view["limits"]) + repr(view["limits"]["hosts"]) + repr(view["tags"])
    assert "sk-SECRET" not in text
    assert "'x'" not in text
    assert "api_key" in repr(view)
    assert "a list of 2 items" in repr(view["limits"]["hosts"])


def test_reading_a_missing_key_of_a_defaultdict_does_not_insert_it() -> None:
    raw: defaultdict[str, list[int]] = defaultdict(list)
    view = read_only({"cache": raw})
    with pytest.raises(KeyError):
        view["cache"]["missing"]
    assert raw == {}


def test_other_mappings_are_viewed_too_and_views_are_not_wrapped_twice() -> None:
    ordered = read_only(OrderedDict(a={"b": 1}))
    with pytest.raises(ToolContextReadOnlyError):
        ordered["a"]["b"] = 2
    proxy = read_only(MappingProxyType({"a": [1]}))
    with pytest.raises(ToolContextReadOnlyError):
        proxy["a"].append(2)
    view = read_only({"a": 1})
    assert read_only(view) is view
    assert read_only({"inner": view})["inner"] is view


def test_what_is_not_a_mapping_is_passed_as_it_is() -> None:
    @dataclass(frozen=True)
    class Deps:
        region: str

    deps_object, connection, items = Deps("eu"), Connection(), [1, 2]
    assert read_only(deps_object) is deps_object
    assert read_only(connection) is connection
    assert read_only(items) is items  # only a mapping tool_context is wrapped
    assert read_only(None) is None


def test_list_views_compare_like_lists() -> None:
    view = read_only({"hosts": ["a", {"p": 1}], "other": ["a", {"p": 1}]})
    assert view["hosts"] == ["a", {"p": 1}]
    assert view["hosts"] == ("a", {"p": 1})
    assert view["hosts"] == view["other"]
    assert view["hosts"] != ["a"]
    assert [item for item in view["hosts"]][1] == {"p": 1}
    with pytest.raises(TypeError):
        hash(view["hosts"])
