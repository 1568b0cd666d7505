from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from actors import (
    AgentContext,
    AssistantMessage,
    ContextUpdate,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from actors.exceptions import InvalidUpdateError, SerializationError, UserError

from .helpers import FakeClock, json_values, messages

CALL = ToolCall(id="c1", name="search", arguments={"q": "tea"})
RESTORE = datetime(2030, 6, 1, tzinfo=UTC)


def busy_context(clock: FakeClock) -> AgentContext:
    ctx = AgentContext(
        "root-sub-1",
        name="researcher",
        parent_id="root",
        metadata={"user": {"name": "Ada"}},
        max_iterations=7,
        clock=clock,
    )
    ctx.put_system_prompt_overlay("be brief")  # never serialized
    ctx.log_event("turn_start", {"run_id": "run-1"})
    ctx.add_message(UserMessage(content="find tea"))
    ctx.add_message(UserMessage(content="user likes green tea"), source="memory")
    ctx.increment_iteration()
    ctx.add_usage(Usage(requests=1, input_tokens=12, output_tokens=3))
    ctx.add_message(AssistantMessage(content="", tool_calls=(CALL,)))
    ctx.add_tool_call(CALL)
    ctx.apply_update(ContextUpdate().append("notes", "green").log_event("app.note", {"n": 1}))
    ctx.add_message(ToolResultMessage(tool_call_id="c1", tool_name="search", content="sencha"))
    ctx.replace_message_range(1, 2, UserMessage(content="find tea (user likes green)"))
    return ctx


def assert_same_state(restored: AgentContext, ctx: AgentContext) -> None:
    assert restored.events == ctx.events
    assert restored.messages == ctx.messages
    assert restored.entries == ctx.entries
    assert restored.metadata == ctx.metadata
    assert restored.usage == ctx.usage
    assert restored.iteration == ctx.iteration
    assert restored.needs_response == ctx.needs_response
    assert restored.system_prompt == ctx.system_prompt
    assert restored.suspended == ctx.suspended
    assert (restored.agent_id, restored.name, restored.parent_id, restored.run_id) == (
        ctx.agent_id,
        ctx.name,
        ctx.parent_id,
        ctx.run_id,
    )
    assert restored.max_iterations == ctx.max_iterations
    assert restored.serialize() == ctx.serialize()


# -- writing --------------------------------------------------------------------------------


def test_serialize_is_plain_json_version_2(clock: FakeClock) -> None:
    ctx = busy_context(clock)
    blob = ctx.serialize()
    assert json.loads(json.dumps(blob)) == blob
    assert blob["version"] == 2
    assert blob["agent_id"] == "root-sub-1"
    assert blob["messages"] == [m.model_dump(mode="json") for m in ctx.messages]
    assert blob["metadata"] == {"user": {"name": "Ada"}, "notes": ["green"]}
    assert blob["usage"] == {"requests": 1, "input_tokens": 12, "output_tokens": 3, "tool_calls": 1}
    assert blob["iteration"] == 1
    assert blob["system_prompt"] is None  # no logged system prompt; the overlay is not kept
    assert "be brief" not in json.dumps(blob)
    assert len(blob["events"]) == len(ctx.events)
    assert blob["events"][0]["created_at"] == "2025-01-01T00:00:00Z"


def test_serialize_never_contains_the_tool_context(clock: FakeClock) -> None:
    ctx = busy_context(clock)
    secret = {"api_key": "sk-SECRET-123"}
    run = ctx.run_context(CALL, tool_context=secret)
    assert run.tool_context == secret
    assert "sk-SECRET-123" not in json.dumps(ctx.serialize())


def test_the_blob_is_a_copy(clock: FakeClock) -> None:
    ctx = busy_context(clock)
    ctx.log_event("suspended", {"request": {"id": "r1"}, "tool_call": CALL.model_dump(mode="json")})
    blob = ctx.serialize()
    blob["metadata"]["notes"].append("mutated")
    blob["metadata"]["user"]["name"] = "Eve"
    blob["suspended"][0]["request"]["id"] = "mutated"
    blob["events"][-1]["data"]["request"]["id"] = "mutated"
    assert ctx.metadata == {"user": {"name": "Ada"}, "notes": ["green"]}
    assert list(ctx.suspended) == ["r1"]
    assert ctx.events[-1].data["request"]["id"] == "r1"


# -- reading version 2 ----------------------------------------------------------------------


def test_roundtrip(clock: FakeClock) -> None:
    ctx = busy_context(clock)
    restored = AgentContext.deserialize(json.loads(json.dumps(ctx.serialize())))
    assert_same_state(restored, ctx)


def test_a_restored_context_goes_on_with_the_given_clock(clock: FakeClock) -> None:
    ctx = busy_context(clock)
    restored = AgentContext.deserialize(ctx.serialize(), clock=FakeClock(RESTORE))
    event = restored.add_message(UserMessage(content="more"))
    assert event.seq == len(ctx.events)
    assert event.created_at == RESTORE


def test_suspensions_survive(clock: FakeClock) -> None:
    ctx = AgentContext(clock=clock)
    ctx.add_message(AssistantMessage(tool_calls=(CALL,)))
    ctx.log_event(
        "suspended",
        {"request": {"id": "r1", "kind": "input"}, "tool_call": CALL.model_dump(mode="json")},
    )
    restored = AgentContext.deserialize(ctx.serialize())
    assert restored.suspended == ctx.suspended
    assert restored.dangling_tool_calls() == []


def test_an_unknown_event_type_is_dropped_with_a_warning(clock: FakeClock) -> None:
    ctx = AgentContext(clock=clock)
    ctx.add_message(UserMessage(content="a"))
    ctx.log_event("app.note")
    ctx.add_message(UserMessage(content="b"))
    blob = ctx.serialize()
    blob["events"][1]["type"] = "from_the_future"
    with capture_logs() as logs:
        restored = AgentContext.deserialize(blob)
    assert [(log["log_level"], log["event"], log["event_type"]) for log in logs] == [
        ("warning", "unknown event type dropped", "from_the_future")
    ]  # and no seq-gap warning: a dropped event is no gap
    assert [e.type for e in restored.events] == ["user_message", "user_message"]
    assert [e.seq for e in restored.events] == [0, 1]  # seq stays the index in the log
    assert restored.messages == ctx.messages


def test_a_seq_gap_warns_and_the_log_is_renumbered(clock: FakeClock) -> None:
    ctx = AgentContext(clock=clock)
    ctx.add_messages([UserMessage(content="a"), UserMessage(content="b")])
    blob = ctx.serialize()
    blob["events"][1]["seq"] = 5
    with capture_logs() as logs:
        restored = AgentContext.deserialize(blob)
    assert [(log["log_level"], log["expected"], log["found"]) for log in logs] == [
        ("warning", 1, 5)
    ]
    assert [e.seq for e in restored.events] == [0, 1]
    assert restored.messages == ctx.messages
    assert restored.add_message(UserMessage(content="c")).seq == 2


# -- reading version 1 ----------------------------------------------------------------------


def test_version_1_is_seeded_into_a_log_stamped_with_the_restore_time() -> None:
    v1 = {
        "version": 1,
        "agent_id": "legacy",
        "messages": [
            {"role": "system", "content": "you help"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [CALL.model_dump()]},
            {"role": "tool", "tool_call_id": "c1", "tool_name": "search", "content": "r"},
        ],
        "metadata": {"notes": ["a"]},
        "usage": {"requests": 2, "input_tokens": 9, "output_tokens": 1, "tool_calls": 1},
    }
    restored = AgentContext.deserialize(v1, clock=lambda: RESTORE)
    assert restored.agent_id == "legacy"
    assert restored.messages == [
        SystemMessage(content="you help"),
        UserMessage(content="hi"),
        AssistantMessage(tool_calls=(CALL,)),
        ToolResultMessage(tool_call_id="c1", tool_name="search", content="r"),
    ]
    assert restored.metadata == {"notes": ["a"]}
    assert restored.usage == Usage(requests=2, input_tokens=9, output_tokens=1, tool_calls=1)
    assert restored.needs_response is True
    # version 1 kept no timestamps: every seeded event is stamped with the restore time
    assert {e.created_at for e in restored.events} == {RESTORE}
    assert [e.type for e in restored.events] == [
        "context_update",
        "system_message",
        "user_message",
        "assistant_message",
        "tool_result",
        "usage",
    ]
    # and it is a version 2 context from now on
    again = AgentContext.deserialize(restored.serialize())
    assert_same_state(again, restored)


def test_version_1_with_only_messages() -> None:
    restored = AgentContext.deserialize({"version": 1, "messages": []})
    assert (restored.messages, restored.metadata, restored.usage) == ([], {}, Usage())


# -- bad blobs ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [None, 0, 3, "2", 2.0, True])
def test_an_unknown_version_is_refused(clock: FakeClock, version: Any) -> None:
    blob = AgentContext(clock=clock).serialize()
    blob["version"] = version
    with pytest.raises(SerializationError, match=f"unknown serialization version {version!r}"):
        AgentContext.deserialize(blob)


def test_a_missing_version_is_refused() -> None:
    with pytest.raises(SerializationError, match="unknown serialization version None"):
        AgentContext.deserialize({"events": []})


@pytest.mark.parametrize("blob", [[], "{}", None, 2])
def test_a_blob_must_be_a_mapping(blob: Any) -> None:
    with pytest.raises(SerializationError, match="a serialized context is a mapping"):
        AgentContext.deserialize(blob)


def _set(path: tuple[Any, ...], value: Any) -> Any:
    def change(blob: dict[str, Any]) -> None:
        target: Any = blob
        for part in path[:-1]:
            target = target[part]
        if value is _DELETE:
            del target[path[-1]]
        else:
            target[path[-1]] = value

    return change


_DELETE = object()
_USAGE_EVENT = {"seq": 2, "created_at": "2025-01-01T00:00:02Z"}
# Valid on their own, but "k" holds a string by then: only replaying the log finds out.
_BAD_OPS = {"ops": [{"op": "append", "key": "k", "value": 1}]}


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (_set(("events",), None), "needs an 'events' list"),
        (_set(("events",), {"0": {}}), "needs an 'events' list"),
        (_set(("events", 0), "event"), "event 0 is malformed"),
        (_set(("events", 0, "seq"), _DELETE), r"event 0 is malformed: seq"),
        (_set(("events", 1, "created_at"), "yesterday"), r"event 1 is malformed: created_at"),
        (_set(("events", 1, "data"), [1]), r"event 1 is malformed: data"),
        (_set(("events", 1, "extra"), 1), r"event 1 is malformed"),
        (_set(("events", 1, "data", "role"), "robot"), r"event 1 \(user_message\) has a malf"),
        (_set(("events", 1, "data", "content"), 5), r"event 1 \(user_message\) has a malf"),
        (_set(("events", 0, "data", "ops"), "set k"), r"event 0 \(context_update\) has a malf"),
        (_set(("events", 0, "data"), {}), r"event 0 \(context_update\) has a malformed"),
        (_set(("events", 2, "data", "requests"), -1), r"event 2 \(usage\) has a malformed"),
        (_set(("events", 3, "data", "first"), "0"), r"event 3 \(replace\) has a malformed"),
        (_set(("events", 3, "data", "last"), _DELETE), r"event 3 \(replace\) has a malformed"),
        (_set(("events", 3, "data", "message"), {}), r"event 3 \(replace\) has a malformed"),
        (_set(("events", 4, "data", "iteration"), "1"), r"event 4 \(step_start\) has a malf"),
        (_set(("events", 5, "data", "tool_call"), {}), r"event 5 \(suspended\) has a malf"),
        (_set(("max_iterations",), "50"), "field 'max_iterations'.*wrong type"),
        (_set(("max_iterations",), 0), "'max_iterations' must be positive"),
        (_set(("agent_id",), 7), "field 'agent_id'.*wrong type"),
        (_set(("name",), ["n"]), "field 'name'.*wrong type"),
        (_set(("system_prompt",), 1), "field 'system_prompt'.*wrong type"),
        (
            _set(("events", 2), {**_USAGE_EVENT, "type": "context_update", "data": _BAD_OPS}),
            r"cannot be replayed: event 2 \(context_update\).*cannot append to 'k'",
        ),
    ],
)
def test_a_malformed_version_2_blob_is_refused(change: Any, match: str) -> None:
    ctx = AgentContext(metadata={"k": "v"}, clock=FakeClock())
    ctx.add_message(UserMessage(content="a"))  # 1
    ctx.add_usage(Usage(requests=1))  # 2
    ctx.replace_message(0, UserMessage(content="b"))  # 3
    ctx.increment_iteration()  # 4
    ctx.log_event(  # 5
        "suspended", {"request": {"id": "r"}, "tool_call": CALL.model_dump(mode="json")}
    )
    blob = ctx.serialize()
    change(blob)
    with pytest.raises(SerializationError, match=match):
        AgentContext.deserialize(blob)
    assert issubclass(SerializationError, UserError)


@pytest.mark.parametrize(
    ("blob", "match"),
    [
        ({"version": 1}, "needs a 'messages' list"),
        ({"version": 1, "messages": [{"role": "robot"}]}, "a message is malformed"),
        ({"version": 1, "messages": [], "usage": {"requests": -2}}, "'usage' is malformed"),
        ({"version": 1, "messages": [], "usage": 3}, "field 'usage'.*wrong type"),
        ({"version": 1, "messages": [], "metadata": [1]}, "field 'metadata'.*wrong type"),
    ],
)
def test_a_malformed_version_1_blob_is_refused(blob: dict[str, Any], match: str) -> None:
    with pytest.raises(SerializationError, match=match):
        AgentContext.deserialize(blob)


# -- property: roundtrip --------------------------------------------------------------------

positions = st.integers(0, 5)
actions = st.one_of(
    st.tuples(st.just("add"), messages, st.sampled_from([None, "memory"])),
    st.tuples(st.just("replace"), positions, positions, messages),
    st.tuples(st.just("usage"), st.integers(0, 3), st.integers(0, 50)),
    st.tuples(st.just("tool_call"), st.sampled_from(["c1", "c2"])),
    st.tuples(st.just("set"), st.sampled_from(["a", "b"]), json_values),
    st.tuples(st.just("append"), st.sampled_from(["a", "b"]), json_values),
    st.tuples(st.just("note"), json_values),
    st.tuples(st.just("step")),
    st.tuples(st.just("turn"), st.sampled_from(["r1", "r2"])),
)


def act(ctx: AgentContext, action: tuple[Any, ...]) -> None:
    kind = action[0]
    if kind == "add":
        ctx.add_message(action[1], source=action[2])
    elif kind == "replace":
        ctx.replace_message_range(min(action[1:3]), max(action[1:3]), action[3])
    elif kind == "usage":
        ctx.add_usage(Usage(requests=action[1], input_tokens=action[2]))
    elif kind == "tool_call":
        ctx.add_tool_call(ToolCall(id=action[1], name="search"))
    elif kind in ("set", "append"):
        ctx.apply_update(getattr(ContextUpdate(), kind)(action[1], action[2]))
    elif kind == "note":
        ctx.apply_update(ContextUpdate().log_event("app.note", {"value": action[1]}))
    elif kind == "step":
        ctx.increment_iteration()
    else:
        ctx.log_event("turn_start", {"run_id": action[1]})


@settings(max_examples=100, deadline=None)
@given(
    st.lists(actions, max_size=12),
    st.none() | st.text(max_size=4),
    st.dictionaries(st.sampled_from(["a", "c"]), json_values, max_size=2),
)
def test_deserialize_serialize_gives_the_same_context(
    actions: list[tuple[Any, ...]], prompt: str | None, metadata: dict[str, Any]
) -> None:
    ctx = AgentContext("a", metadata=metadata, clock=FakeClock())
    if prompt is not None:
        ctx.add_message(SystemMessage(content=prompt))
    with capture_logs():
        for action in actions:
            # append onto a non-list is refused, and changes nothing
            with contextlib.suppress(InvalidUpdateError):
                act(ctx, action)
    blob = ctx.serialize()
    restored = AgentContext.deserialize(json.loads(json.dumps(blob)))
    assert_same_state(restored, ctx)


# -- the system prompt: the logged part is kept, the overlay never ---------------------------


def test_the_logged_system_prompt_is_kept_and_the_overlay_is_not(clock: FakeClock) -> None:
    ctx = AgentContext("a", clock=clock)
    ctx.add_messages([SystemMessage(content="You help Ada."), UserMessage(content="hi")])
    ctx.put_system_prompt_overlay("Answer in French.")
    blob = json.loads(json.dumps(ctx.serialize()))
    assert blob["system_prompt"] == "You help Ada."
    assert "Answer in French." not in json.dumps(blob)
    restored = AgentContext.deserialize(blob)
    assert restored.system_prompt == "You help Ada."
    assert restored.system_prompt_overlay is None
    assert restored.model_messages() == restored.messages


def test_an_overlay_written_by_an_older_version_is_not_read_back(clock: FakeClock) -> None:
    ctx = AgentContext("a", clock=clock)
    ctx.add_messages([SystemMessage(content="logged"), UserMessage(content="hi")])
    blob = ctx.serialize()
    blob["system_prompt"] = "an overlay of an older version"  # it was persisted then
    restored = AgentContext.deserialize(blob)
    assert restored.system_prompt == "logged"  # the log says what was logged
    assert restored.system_prompt_overlay is None  # the code that runs now puts its own
    v1 = {"version": 1, "messages": [{"role": "user", "content": "hi"}], "system_prompt": "x"}
    assert AgentContext.deserialize(v1, clock=clock).model_messages() == [UserMessage(content="hi")]
