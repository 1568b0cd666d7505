from __future__ import annotations

import copy
import doctest
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

import actors.context._update
from actors import AgentContext, ContextUpdate, ToolCall
from actors.exceptions import InvalidUpdateError, UserError

from .helpers import RefError, build_update, json_dicts, operations, ref_fold

# -- building -------------------------------------------------------------------------------


def test_each_builder_returns_a_new_update() -> None:
    empty = ContextUpdate()
    one = empty.set("a", 1)
    two = one.append("b", 2)
    assert (len(empty), len(one), len(two)) == (0, 1, 2)
    assert not empty
    assert one.fold({}) == {"a": 1}


def test_operations_keep_the_order_they_were_added() -> None:
    update = ContextUpdate().set("a", 1).append("b", "x").delete("c").merge("d", {"e": 1})
    assert [op.op for op in update.operations] == ["set", "append", "delete", "merge"]
    assert [op.op for op in update] == ["set", "append", "delete", "merge"]


def test_values_are_copied_when_the_update_is_built() -> None:
    items: list[Any] = [1]
    update = ContextUpdate().set("items", items)
    items.append(2)
    assert update.fold({}) == {"items": [1]}


def test_tuples_become_lists() -> None:
    assert ContextUpdate().set("t", (1, (2,))).fold({}) == {"t": [1, [2]]}


@pytest.mark.parametrize("key", [1, None, "", ("a",)])
def test_keys_must_be_non_empty_strings(key: Any) -> None:
    for build in (
        lambda: ContextUpdate().set(key, 1),
        lambda: ContextUpdate().merge(key, {}),
        lambda: ContextUpdate().append(key, 1),
        lambda: ContextUpdate().delete(key),
    ):
        with pytest.raises(InvalidUpdateError, match="keys must be non-empty strings"):
            build()


def _cycle() -> dict[str, Any]:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    return loop


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ({1, 2}, "value for key 'notes'"),
        (object(), "value for key 'notes'"),
        (float("nan"), "value for key 'notes'"),
        (float("inf"), "value for key 'notes'"),
        ({"deep": [1, {"x": b"bytes"}]}, "value for key 'notes'['deep'][1]['x']"),
        ({1: "int key"}, "value for key 'notes' key 1"),
        (_cycle(), "a cycle"),
    ],
)
def test_values_must_be_json_and_the_error_names_the_key(value: Any, where: str) -> None:
    for build in (
        lambda: ContextUpdate().set("notes", value),
        lambda: ContextUpdate().append("notes", value),
    ):
        with pytest.raises(InvalidUpdateError) as info:
            build()
        assert where in str(info.value)
        assert "not JSON-serializable" in str(info.value)
    assert issubclass(InvalidUpdateError, UserError)


def test_merge_needs_a_mapping() -> None:
    with pytest.raises(InvalidUpdateError, match=r"merge into 'prefs' needs a mapping.*set\(\)"):
        ContextUpdate().merge("prefs", [1, 2])  # type: ignore[arg-type]


@pytest.mark.parametrize("event_type", ["note", "user_message", "tool_result", "replace", 3, ""])
def test_log_event_needs_a_namespaced_type(event_type: Any) -> None:
    with pytest.raises(InvalidUpdateError, match=r"namespaced type such as 'app\.note'"):
        ContextUpdate().log_event(event_type)


@pytest.mark.parametrize("event_type", ["app.note", "my_app.sub.kind", "x.user_message"])
def test_log_event_accepts_namespaced_types(event_type: str) -> None:
    update = ContextUpdate().log_event(event_type, {"n": 1})
    assert [(e.type, e.data) for e in update.events] == [(event_type, {"n": 1})]


def test_a_trailing_newline_is_not_a_namespaced_type() -> None:
    with pytest.raises(InvalidUpdateError):
        ContextUpdate().log_event("app.note\n")


@pytest.mark.parametrize("data", [5, "text", [("a", 1)]])
def test_log_event_data_must_be_a_mapping(data: Any) -> None:
    with pytest.raises(InvalidUpdateError, match="must be a mapping"):
        ContextUpdate().log_event("app.note", data)


def test_log_event_data_must_be_json() -> None:
    with pytest.raises(InvalidUpdateError, match="not JSON-serializable"):
        ContextUpdate().log_event("app.note", {"when": object()})


def test_the_constructor_takes_only_operations() -> None:
    with pytest.raises(InvalidUpdateError, match="not an operation"):
        ContextUpdate(("set a 1",))  # type: ignore[arg-type]
    update = ContextUpdate().set("a", 1)
    assert ContextUpdate(update.operations) == update


# -- reading --------------------------------------------------------------------------------


def test_events_and_touches_metadata() -> None:
    only_events = ContextUpdate().log_event("app.a").log_event("app.b", {"x": 1})
    assert not only_events.touches_metadata
    assert [e.type for e in only_events.events] == ["app.a", "app.b"]
    mixed = only_events.set("k", 1)
    assert mixed.touches_metadata


def test_equality_hash_and_concatenation() -> None:
    a = ContextUpdate().set("a", {"x": [1]})
    b = ContextUpdate().append("b", 2)
    assert a == ContextUpdate().set("a", {"x": [1]})
    assert hash(a) == hash(ContextUpdate().set("a", {"x": [1]}))
    assert a != b
    assert a + b == ContextUpdate().set("a", {"x": [1]}).append("b", 2)
    assert a.__add__(1) is NotImplemented
    assert "set" in repr(a)


def test_json_roundtrip() -> None:
    update = (
        ContextUpdate()
        .set("a", 1)
        .merge("b", {"c": {"d": 2}})
        .append("e", [3])
        .delete("f")
        .log_event("app.note", {"g": None})
    )
    assert ContextUpdate.from_json(update.to_json()) == update


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        ({"op": "set"}, "operations must be a list"),
        (["set"], "an operation must be a mapping"),
        ([{"op": "upsert", "key": "a"}], "unknown operation 'upsert'"),
        ([{"op": "set", "key": 1, "value": 1}], "keys must be non-empty strings"),
        ([{"op": "merge", "key": "a", "value": 1}], "needs a mapping"),
        ([{"op": "log_event", "type": "note"}], "namespaced"),
    ],
)
def test_from_json_rejects_bad_operations(raw: Any, match: str) -> None:
    with pytest.raises(InvalidUpdateError, match=match):
        ContextUpdate.from_json(raw)


# -- the reducer ----------------------------------------------------------------------------


def test_set_replaces() -> None:
    assert ContextUpdate().set("a", [1]).fold({"a": {"x": 1}, "b": 2}) == {"a": [1], "b": 2}


def test_merge_is_deep_at_any_depth() -> None:
    state = {"p": {"ui": {"theme": {"dark": False, "size": 2}}, "lang": "en"}}
    update = ContextUpdate().merge("p", {"ui": {"theme": {"dark": True}}, "tz": "UTC"})
    assert update.fold(state) == {
        "p": {"ui": {"theme": {"dark": True, "size": 2}}, "lang": "en", "tz": "UTC"}
    }


def test_merge_creates_a_missing_key_and_replaces_a_non_mapping() -> None:
    update = ContextUpdate().merge("a", {"x": 1}).merge("b", {"y": 2})
    assert update.fold({"b": [1, 2]}) == {"a": {"x": 1}, "b": {"y": 2}}
    # Inside the mapping too: a non-mapping value meets a mapping and is replaced.
    nested = ContextUpdate().merge("a", {"x": {"y": 1}})
    assert nested.fold({"a": {"x": 5}}) == {"a": {"x": {"y": 1}}}


def test_append_creates_the_list_for_a_missing_key_or_none() -> None:
    update = ContextUpdate().append("a", 1).append("b", 2).append("a", 3)
    assert update.fold({"b": None}) == {"a": [1, 3], "b": [2]}


def test_append_adds_a_list_as_one_item() -> None:
    assert ContextUpdate().append("a", [2, 3]).fold({"a": [1]}) == {"a": [1, [2, 3]]}


@pytest.mark.parametrize("current", [0, "text", {"k": 1}, False])
def test_append_to_a_non_list_raises_and_leaves_the_state(current: Any) -> None:
    state = {"notes": current, "other": [1]}
    before = copy.deepcopy(state)
    update = ContextUpdate().set("other", "changed").append("notes", "x")
    with pytest.raises(InvalidUpdateError, match="cannot append to 'notes'") as info:
        update.fold(state)
    assert "not a list" in str(info.value)
    assert state == before


def test_delete_removes_and_a_missing_key_is_a_no_op() -> None:
    assert ContextUpdate().delete("a").delete("zzz").fold({"a": 1, "b": 2}) == {"b": 2}


def test_operations_apply_in_order() -> None:
    update = ContextUpdate().set("a", 1).delete("a").append("a", 2).merge("m", {"x": 1})
    assert update.fold({}) == {"a": [2], "m": {"x": 1}}
    assert ContextUpdate().append("a", 1).set("a", 0).fold({}) == {"a": 0}


def test_fold_never_changes_its_input() -> None:
    state: dict[str, Any] = {"m": {"x": {"y": 1}}, "l": [1]}
    before = copy.deepcopy(state)
    result = ContextUpdate().merge("m", {"x": {"z": 2}}).append("l", 2).delete("gone").fold(state)
    assert state == before
    assert result == {"m": {"x": {"y": 1, "z": 2}}, "l": [1, 2]}


def test_log_event_touches_no_metadata_and_a_bare_mapping_drops_it_with_a_warning() -> None:
    update = ContextUpdate().log_event("app.a").set("k", 1).log_event("app.b")
    with capture_logs() as logs:
        assert update.fold({"x": 1}) == {"x": 1, "k": 1}
    assert [(log["log_level"], log["dropped_event_types"]) for log in logs] == [
        ("warning", ["app.a", "app.b"])
    ]


def test_no_warning_without_events_or_when_turned_off() -> None:
    with capture_logs() as logs:
        ContextUpdate().set("k", 1).fold({})
        ContextUpdate().log_event("app.a").fold({}, warn_dropped_events=False)
    assert logs == []


def test_fold_needs_a_mapping() -> None:
    with pytest.raises(InvalidUpdateError, match="fold needs a mapping"):
        ContextUpdate().set("a", 1).fold([("a", 1)])  # type: ignore[arg-type]


def test_fold_on_a_frozen_snapshot_gives_the_same_result_as_on_the_metadata() -> None:
    # A tool tested on its own folds its update onto the RunContext's read-only snapshot.
    ctx = AgentContext(metadata={"notes": ["a"], "prefs": {"ui": {"size": 1}}})
    run = ctx.run_context(ToolCall(id="c", name="t"))
    update = ContextUpdate().append("notes", "b").merge("prefs", {"ui": {"dark": True}})
    assert isinstance(run.metadata, MappingProxyType)
    with capture_logs():
        assert update.fold(run.metadata) == update.fold(ctx.metadata)
    assert update.fold(run.metadata) == {
        "notes": ["a", "b"],
        "prefs": {"ui": {"size": 1, "dark": True}},
    }


def test_docstring_examples() -> None:
    result = doctest.testmod(actors.context._update)
    assert result.attempted > 0
    assert result.failed == 0


# -- property: the reducer against a reference model ----------------------------------------


@settings(max_examples=150, deadline=None)
@given(json_dicts, st.lists(operations, max_size=8))
def test_fold_matches_the_reference_model(
    state: dict[str, Any], ops: list[tuple[str, str, Any]]
) -> None:
    update = build_update(ops)
    before = copy.deepcopy(state)
    try:
        expected = ref_fold(state, ops)
    except RefError:
        event("append or increment onto the wrong type")
        with pytest.raises(InvalidUpdateError):
            update.fold(state, warn_dropped_events=False)
    else:
        assert update.fold(state, warn_dropped_events=False) == expected
        # the wire form (how the log records an update) folds the same
        again = ContextUpdate.from_json(update.to_json())
        assert again.fold(state, warn_dropped_events=False) == expected
    assert state == before


@settings(max_examples=50, deadline=None)
@given(json_dicts, st.lists(operations, max_size=5), st.lists(operations, max_size=5))
def test_folding_a_sum_is_folding_one_after_the_other(
    state: dict[str, Any], first: list[Any], second: list[Any]
) -> None:
    a, b = build_update(first), build_update(second)
    try:
        expected = b.fold(a.fold(state, warn_dropped_events=False), warn_dropped_events=False)
    except InvalidUpdateError:
        with pytest.raises(InvalidUpdateError):
            (a + b).fold(state, warn_dropped_events=False)
    else:
        assert (a + b).fold(state, warn_dropped_events=False) == expected


# -- peer messages --------------------------------------------------------------------------


def test_send_touches_no_metadata_and_round_trips_its_wire_form() -> None:
    update = ContextUpdate().set("a", 1).send("bob", "hello")
    assert [op.op for op in update] == ["set", "send"]
    assert [(s.to, s.content) for s in update.sends] == [("bob", "hello")]
    assert ContextUpdate().send("bob", "x").touches_metadata is False
    assert update.fold({}, warn_dropped_events=False) == {"a": 1}
    assert ContextUpdate.from_json(update.to_json()) == update
    assert update.to_json()[1] == {"op": "send", "to": "bob", "content": "hello"}


def test_a_bare_fold_warns_that_messages_are_not_sent() -> None:
    with capture_logs() as logs:
        ContextUpdate().send("bob", "hi").fold({})
    assert [log["receivers"] for log in logs if "receivers" in log] == [["bob"]]


@pytest.mark.parametrize(("to", "content"), [("", "x"), (None, "x"), (3, "x"), ("bob", 1)])
def test_send_needs_an_id_and_text(to: Any, content: Any) -> None:
    with pytest.raises(InvalidUpdateError, match="send"):
        ContextUpdate().send(to, content)


def test_apply_update_numbers_each_send_after_the_agents_earlier_ones() -> None:
    ctx = AgentContext("alice")
    ctx.apply_update(ContextUpdate().send("bob", "one"))
    events = ctx.apply_update(ContextUpdate().log_event("app.x").send("carol", "two"))
    assert [e.type for e in events] == ["app.x", "message_sent"]
    assert events[1].data == {"message_id": "alice:2", "n": 2, "to": "carol", "content": "two"}
    assert AgentContext.from_events(ctx.events, agent_id="alice").sent_messages == 2
