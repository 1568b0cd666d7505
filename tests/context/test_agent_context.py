from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from actors import (
    AgentContext,
    AssistantMessage,
    CancellationToken,
    ContextUpdate,
    Event,
    Message,
    RunContext,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    TranscriptEntry,
    Usage,
    UserMessage,
)
from actors.context._agent_context import INTERRUPTED_NOT_STARTED
from actors.exceptions import InvalidUpdateError, ToolContextReadOnlyError, UserError

from .helpers import (
    START,
    FakeClock,
    RefError,
    build_update,
    json_dicts,
    messages,
    operations,
    ref_fold,
)

CALL = ToolCall(id="c1", name="search", arguments={"q": "x"})


def user(text: str = "hi") -> UserMessage:
    return UserMessage(content=text)


def assistant(text: str = "ok", *calls: ToolCall) -> AssistantMessage:
    return AssistantMessage(content=text, tool_calls=calls)


def result(call: ToolCall = CALL, text: str = "found") -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call.id, tool_name=call.name, content=text)


def rebuilt(ctx: AgentContext) -> AgentContext:
    return AgentContext.from_events(ctx.events, agent_id=ctx.agent_id)


# -- construction ---------------------------------------------------------------------------


def test_a_new_context_is_empty(ctx: AgentContext) -> None:
    assert (ctx.agent_id, ctx.name, ctx.parent_id) == ("agent-1", "writer", None)
    assert ctx.events == ()
    assert ctx.messages == []
    assert ctx.metadata == {}
    assert ctx.usage == Usage()
    assert (ctx.iteration, ctx.max_iterations, ctx.needs_response) == (0, 50, False)
    assert ctx.last_message is None
    assert ctx.system_prompt is None
    assert "agent-1" in repr(ctx)


def test_the_name_defaults_to_the_id() -> None:
    assert AgentContext("a7").name == "a7"


def test_initial_metadata_is_logged_so_a_rebuild_has_it(clock: FakeClock) -> None:
    ctx = AgentContext(metadata={"user": {"name": "Ada"}, "notes": ()}, clock=clock)
    assert ctx.metadata == {"user": {"name": "Ada"}, "notes": []}
    [event] = ctx.events
    assert (event.type, event.data["source"]) == ("context_update", "initial")
    assert rebuilt(ctx).metadata == ctx.metadata


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"agent_id": ""}, UserError, "agent_id must be a non-empty string"),
        ({"agent_id": 3}, UserError, "agent_id must be a non-empty string"),
        ({"max_iterations": 0}, UserError, "max_iterations must be a positive int"),
        ({"max_iterations": "5"}, UserError, "max_iterations must be a positive int"),
        ({"name": 5}, UserError, "name must be a string"),
        ({"parent_id": 5}, UserError, "parent_id must be a string"),
        ({"clock": "now"}, UserError, "clock must be a function"),
        ({"metadata": [("a", 1)]}, UserError, "metadata must be a mapping"),
        ({"metadata": {"a": {1, 2}}}, InvalidUpdateError, "value for key 'a'"),
        ({"metadata": {1: "x"}}, InvalidUpdateError, "keys must be non-empty strings"),
    ],
)
def test_bad_constructor_arguments(kwargs: dict[str, Any], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        AgentContext(**kwargs)


# -- the log --------------------------------------------------------------------------------


def test_each_event_has_its_index_type_data_and_a_clock_time(
    ctx: AgentContext, clock: FakeClock
) -> None:
    ctx.add_message(user("a"))
    ctx.log_event("turn_start", {"run_id": "r1"})
    ctx.add_message(assistant("b"))
    assert [(e.seq, e.type) for e in ctx.events] == [
        (0, "user_message"),
        (1, "turn_start"),
        (2, "assistant_message"),
    ]
    assert [e.created_at for e in ctx.events] == [clock.tick(0), clock.tick(1), clock.tick(2)]
    assert ctx.events[0].data == {"role": "user", "content": "a"}
    assert ctx.events[0].is_surface
    assert not ctx.events[1].is_surface


def test_the_log_is_append_only_and_returned_as_a_copy(ctx: AgentContext) -> None:
    ctx.add_message(user())
    events = ctx.events
    assert isinstance(events, tuple)
    ctx.add_message(user())
    assert len(events) == 1
    assert ctx.events[0] is events[0]
    with pytest.raises(Exception, match="frozen"):
        events[0].seq = 9  # type: ignore[misc]


def test_a_clock_that_returns_no_datetime_is_a_user_error() -> None:
    ctx = AgentContext(clock=lambda: "now")  # type: ignore[arg-type, return-value]
    with pytest.raises(UserError, match="clock must return a datetime"):
        ctx.add_message(user())
    assert ctx.events == ()


def test_listeners_see_each_event_after_it_is_appended(ctx: AgentContext) -> None:
    seen: list[tuple[int, int]] = []
    unsubscribe = ctx.subscribe(lambda event: seen.append((event.seq, len(ctx.events))))
    ctx.add_message(user())
    ctx.add_usage(Usage(requests=1))
    unsubscribe()
    ctx.add_message(user())
    assert seen == [(0, 1), (1, 2)]
    unsubscribe()  # twice is harmless
    with pytest.raises(UserError, match="listener"):
        ctx.subscribe("not callable")  # type: ignore[arg-type]


# -- messages -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "event_type"),
    [
        (SystemMessage(content="s"), "system_message"),
        (user(), "user_message"),
        (assistant(), "assistant_message"),
        (result(), "tool_result"),
    ],
)
def test_add_message_logs_a_surface_event(
    ctx: AgentContext, message: Message, event_type: str
) -> None:
    event = ctx.add_message(message)
    assert event == ctx.events[-1]
    assert event.type == event_type
    assert ctx.messages == [message]
    assert ctx.last_message == message


@given(message=messages)
@settings(max_examples=60, deadline=None)
def test_a_message_event_holds_the_json_dump_of_its_message(message: Message) -> None:
    # The log's format: what sessions written before hold, and what a restore reads back.
    ctx = AgentContext()
    event = ctx.add_message(message, source="memory")
    assert event.data == {**message.model_dump(mode="json"), "source": "memory"}
    assert json.dumps(event.data) == json.dumps(
        {**message.model_dump(mode="json"), "source": "memory"}
    )
    assert rebuilt(ctx).messages == [message]


def test_a_subclass_of_a_message_is_logged_as_pydantic_dumps_it(ctx: AgentContext) -> None:
    class Noted(UserMessage):
        note: str = "n"

    event = ctx.add_message(Noted(content="hi"))
    assert event.data == {"role": "user", "content": "hi", "note": "n"}


def test_events_of_a_context_copy_with_updates(ctx: AgentContext) -> None:
    # The context builds them without validation: copying them must work as for any model.
    event = ctx.add_message(user("hi"))
    moved = event.model_copy(update={"seq": 7})
    assert (moved.seq, moved.data, event.seq) == (7, event.data, 0)
    assert moved.model_fields_set == set(Event.model_fields)
    assert event.model_dump(exclude_unset=True) == event.model_dump()
    deep = event.model_copy(update={"type": "user_message"}, deep=True)
    assert deep == event
    assert deep.data is not event.data


def test_run_context_holds_what_it_is_given(ctx: AgentContext) -> None:
    token = CancellationToken()
    ctx.add_usage(Usage(requests=1))
    run = ctx.run_context(
        CALL, tool_context={"k": "v"}, metadata={"m": 1}, retry=2, timeout=3.0, cancellation=token
    )
    expected = RunContext(
        tool_context=run.tool_context,
        metadata={"m": 1},
        agent_id=ctx.agent_id,
        parent_id=None,
        run_id="",
        tool_call_id="c1",
        tool_name="search",
        retry=2,
        usage=Usage(requests=1),
        timeout=3.0,
        cancellation=token,
    )
    assert run == expected
    assert repr(run) == repr(expected)
    assert dataclasses.replace(run, retry=5).retry == 5
    assert run.tool_context == {"k": "v"}


def test_source_marks_the_event_not_the_message(ctx: AgentContext) -> None:
    ctx.add_message(user("remember: tea"), source="memory")
    assert ctx.events[0].data["source"] == "memory"
    assert ctx.messages == [user("remember: tea")]
    assert rebuilt(ctx).messages == [user("remember: tea")]


def test_entries_carry_created_at_and_seq(ctx: AgentContext, clock: FakeClock) -> None:
    ctx.log_event("turn_start", {"run_id": "r"})
    ctx.add_message(user("a"))
    assert ctx.entries == (TranscriptEntry(user("a"), clock.tick(1), 1),)


def test_add_messages_appends_in_order(ctx: AgentContext) -> None:
    events = ctx.add_messages([user("a"), assistant("b")], source="seed")
    assert [e.seq for e in events] == [0, 1]
    assert ctx.messages == [user("a"), assistant("b")]
    assert all(e.data["source"] == "seed" for e in ctx.events)


def test_a_bad_message_in_a_batch_changes_nothing(ctx: AgentContext) -> None:
    ctx.add_message(user())
    before = ctx.serialize()
    with pytest.raises(UserError, match="add_messages takes messages, got dict"):
        ctx.add_messages([user("ok"), {"role": "user", "content": "x"}])  # type: ignore[list-item]
    assert ctx.serialize() == before


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda c: c.add_message({"role": "user"}), "add_message takes a message"),
        (lambda c: c.add_message(user(), source=3), "source must be a string"),
        (lambda c: c.add_messages([user()], source={"s"}), "source must be a string"),
    ],
)
def test_add_message_rejects_bad_input(ctx: AgentContext, call: Any, match: str) -> None:
    ctx.add_message(user())
    before = ctx.serialize()
    with pytest.raises(UserError, match=match):
        call(ctx)
    assert ctx.serialize() == before


def test_last_message_and_assistant_messages(ctx: AgentContext) -> None:
    ctx.add_messages([user("q"), assistant("a1", CALL), result(), assistant("a2")])
    assert ctx.last_message == assistant("a2")
    assert ctx.assistant_messages == [assistant("a1", CALL), assistant("a2")]


def test_messages_is_a_new_list_each_time(ctx: AgentContext) -> None:
    ctx.add_message(user())
    ctx.messages.append(user("sneaky"))
    assert ctx.messages == [user()]


# -- needs_response -------------------------------------------------------------------------


def test_needs_response_follows_the_last_turn(ctx: AgentContext) -> None:
    states = []
    for message in [
        SystemMessage(content="s"),  # no change
        user(),  # true
        assistant("calling", CALL),  # tool calls: still owed a reply
        result(),  # true
        assistant("done"),  # false
        SystemMessage(content="s2"),  # no change
    ]:
        ctx.add_message(message)
        states.append(ctx.needs_response)
    assert states == [False, True, True, True, False, False]
    assert rebuilt(ctx).needs_response is False


def test_replacing_the_last_message_updates_needs_response(ctx: AgentContext) -> None:
    ctx.add_messages([user(), assistant("done")])
    ctx.replace_message(1, user("again"))
    assert ctx.needs_response is True
    ctx.replace_message(0, assistant("earlier"))  # not the end: no change
    assert ctx.needs_response is True
    ctx.replace_message_range(0, 1, assistant("summary"))
    assert ctx.needs_response is False
    assert rebuilt(ctx).needs_response is False


# -- tool calls and usage -------------------------------------------------------------------


def test_each_tool_call_event_counts_one_tool_call(ctx: AgentContext) -> None:
    event = ctx.add_tool_call(CALL, child_id="agent-1-sub-1")
    assert event.type == "tool_call"
    assert event.data == {
        "tool_call_id": "c1",
        "name": "search",
        "arguments": {"q": "x"},
        "child_id": "agent-1-sub-1",
    }
    ctx.add_tool_call(ToolCall(id="c2", name="write"))
    assert ctx.usage == Usage(tool_calls=2)
    assert rebuilt(ctx).usage == Usage(tool_calls=2)


def test_tool_call_extra_data_cannot_hide_the_call(ctx: AgentContext) -> None:
    event = ctx.add_tool_call(CALL, tool_call_id="other", name="other")
    assert (event.data["tool_call_id"], event.data["name"]) == ("c1", "search")


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda c: c.add_tool_call("c1"), "add_tool_call takes a ToolCall"),
        (lambda c: c.add_tool_call(CALL, when=object()), "not JSON-serializable"),
    ],
)
def test_add_tool_call_rejects_bad_input(ctx: AgentContext, call: Any, match: str) -> None:
    with pytest.raises(UserError, match=match):
        call(ctx)
    assert ctx.events == ()


def test_usage_events_add_up(ctx: AgentContext) -> None:
    first = ctx.add_usage(Usage(requests=1, input_tokens=10, output_tokens=2))
    ctx.add_usage(Usage(requests=1, input_tokens=5))
    assert first is not None
    assert first.type == "usage"
    assert ctx.usage == Usage(requests=2, input_tokens=15, output_tokens=2)
    assert rebuilt(ctx).usage == ctx.usage


def test_zero_usage_logs_nothing(ctx: AgentContext) -> None:
    assert ctx.add_usage(Usage()) is None
    assert ctx.events == ()


def test_add_usage_needs_a_usage(ctx: AgentContext) -> None:
    with pytest.raises(UserError, match="add_usage takes a Usage, got dict"):
        ctx.add_usage({"requests": 1})  # type: ignore[arg-type]


# -- log_event ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event_type", "data"),
    [
        ("turn_end", {"run_id": "r", "reason": "completed"}),
        ("step_end", {}),
        ("request_header", {"x-id": "1"}),
        ("subagent_spawned", {"child_id": "agent-1-sub-1"}),
        ("app.note", {"text": "hello"}),
        ("acme.billing.charged", None),
    ],
)
def test_log_event_appends_bookkeeping(
    ctx: AgentContext, event_type: str, data: dict[str, Any] | None
) -> None:
    event = ctx.log_event(event_type, data)
    assert event is not None
    assert (event.type, event.data) == (event_type, data or {})
    assert not event.is_surface
    assert ctx.messages == []


@pytest.mark.parametrize(
    "event_type",
    ["system_message", "user_message", "assistant_message", "tool_result", "replace"],
)
def test_log_event_refuses_message_events_with_a_warning(
    ctx: AgentContext, event_type: str
) -> None:
    ctx.add_message(user())
    before = ctx.serialize()
    with capture_logs() as logs:
        assert ctx.log_event(event_type, {"role": "user", "content": "x"}) is None
    assert ctx.serialize() == before
    assert [(log["log_level"], log["event_type"]) for log in logs] == [("warning", event_type)]


@pytest.mark.parametrize(
    ("event_type", "data", "match"),
    [
        ("note", {}, "unknown event type 'note'.*namespaced"),
        (5, {}, "an event type is a string"),
        ("app.note", [1], "must be a mapping"),
        ("app.note", {"x": {1}}, "not JSON-serializable"),
        ("usage", {"requests": -1}, "malformed payload"),
        ("usage", {"cost": 1}, "malformed payload"),
        ("step_start", {"iteration": "x"}, "malformed payload"),
        ("context_update", {}, "malformed payload"),
        ("context_update", {"ops": [{"op": "append", "key": "k", "value": 1}]}, "malformed"),
        ("suspended", {"request": {"id": "r1"}}, "malformed payload"),
    ],
)
def test_log_event_rejects_bad_input_and_changes_nothing(
    ctx: AgentContext, event_type: Any, data: Any, match: str
) -> None:
    ctx.apply_update(ContextUpdate().set("k", "not a list"))
    before = ctx.serialize()
    with pytest.raises(UserError, match=match):
        ctx.log_event(event_type, data)
    assert ctx.serialize() == before


def test_log_event_copies_its_data(ctx: AgentContext) -> None:
    data: dict[str, Any] = {"items": [1]}
    ctx.log_event("app.note", data)
    data["items"].append(2)
    assert ctx.events[0].data == {"items": [1]}


# -- ContextUpdate on a context -------------------------------------------------------------


def test_apply_update_logs_metadata_ops_first_then_the_events(ctx: AgentContext) -> None:
    update = (
        ContextUpdate()
        .log_event("app.first", {"n": 1})
        .append("notes", "a")
        .log_event("app.second")
        .merge("prefs", {"ui": {"dark": True}})
    )
    with capture_logs() as logs:
        events = ctx.apply_update(update, source="tool:search")
    assert logs == []  # a context has a log: nothing is dropped
    assert [e.type for e in events] == ["context_update", "app.first", "app.second"]
    assert list(ctx.events) == events
    assert events[0].data == {
        "ops": [
            {"op": "append", "key": "notes", "value": "a"},
            {"op": "merge", "key": "prefs", "value": {"ui": {"dark": True}}},
        ],
        "source": "tool:search",
    }
    assert ctx.metadata == {"notes": ["a"], "prefs": {"ui": {"dark": True}}}
    assert rebuilt(ctx).metadata == ctx.metadata


def test_an_update_with_only_events_logs_no_context_update(ctx: AgentContext) -> None:
    events = ctx.apply_update(ContextUpdate().log_event("app.a"))
    assert [e.type for e in events] == ["app.a"]
    assert ctx.apply_update(ContextUpdate()) == []


def test_a_failing_update_leaves_the_context_exactly_as_it_was(ctx: AgentContext) -> None:
    ctx.apply_update(ContextUpdate().set("count", 1).set("notes", ["a"]))
    ctx.add_message(user())
    before = ctx.serialize()
    update = ContextUpdate().append("notes", "b").log_event("app.x").append("count", 2)
    with pytest.raises(InvalidUpdateError, match="cannot append to 'count'"):
        ctx.apply_update(update)
    assert ctx.serialize() == before


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda c: c.apply_update({"k": 1}), InvalidUpdateError, "expected a ContextUpdate"),
        (lambda c: c.apply_update(ContextUpdate(), source=1), UserError, "source must be"),
    ],
)
def test_apply_update_rejects_bad_input(
    ctx: AgentContext, call: Any, error: type, match: str
) -> None:
    with pytest.raises(error, match=match):
        call(ctx)
    assert ctx.events == ()


def test_updates_apply_one_after_another(ctx: AgentContext) -> None:
    ctx.apply_update(ContextUpdate().append("log", 1))
    ctx.apply_update(ContextUpdate().append("log", 2).delete("missing"))
    ctx.apply_update(ContextUpdate().merge("m", {"a": {"b": 1}}))
    ctx.apply_update(ContextUpdate().merge("m", {"a": {"c": 2}}))
    assert ctx.metadata == {"log": [1, 2], "m": {"a": {"b": 1, "c": 2}}}


# -- replace --------------------------------------------------------------------------------


def test_replace_message_shadows_one_message(ctx: AgentContext, clock: FakeClock) -> None:
    ctx.add_messages([user("a"), assistant("b"), user("c")])
    event = ctx.replace_message(1, assistant("B"))
    assert event is not None
    assert event.type == "replace"
    assert event.data == {"first": 1, "last": 1, "message": assistant("B").model_dump(mode="json")}
    assert ctx.messages == [user("a"), assistant("B"), user("c")]
    # the shadowed event stays in the log; the entry keeps the first message's time
    assert ctx.events[1].data["content"] == "b"
    assert ctx.entries[1] == TranscriptEntry(assistant("B"), clock.tick(1), event.seq)


def test_replace_message_range_collapses_the_range(ctx: AgentContext, clock: FakeClock) -> None:
    ctx.add_messages([user("a"), assistant("b"), user("c"), assistant("d"), user("e")])
    summary = SystemMessage(content="summary of b..d")
    event = ctx.replace_message_range(1, 3, summary)
    assert event is not None
    assert ctx.messages == [user("a"), summary, user("e")]
    assert [entry.created_at for entry in ctx.entries] == [
        clock.tick(0),
        clock.tick(1),
        clock.tick(4),
    ]
    assert [e.type for e in ctx.events].count("replace") == 1
    assert len(ctx.events) == 6  # nothing deleted


def test_replacing_a_replacement_keeps_the_original_time(
    ctx: AgentContext, clock: FakeClock
) -> None:
    ctx.add_messages([user("a"), user("b"), user("c")])
    ctx.replace_message_range(1, 2, user("bc"))
    ctx.replace_message_range(0, 1, user("abc"))
    assert ctx.messages == [user("abc")]
    assert ctx.entries[0].created_at == clock.tick(0)
    assert rebuilt(ctx).entries == ctx.entries


@pytest.mark.parametrize(("first", "last"), [(3, 3), (-1, -1), (0, 3), (2, 1), (-1, 1)])
def test_a_range_outside_the_transcript_is_a_no_op_with_a_warning(
    ctx: AgentContext, first: int, last: int
) -> None:
    ctx.add_messages([user("a"), user("b"), user("c")])
    before = ctx.serialize()
    with capture_logs() as logs:
        assert ctx.replace_message_range(first, last, user("x")) is None
    assert ctx.serialize() == before
    assert [(log["log_level"], log["first"], log["last"]) for log in logs] == [
        ("warning", first, last)
    ]


def test_replace_message_outside_the_transcript_warns(ctx: AgentContext) -> None:
    with capture_logs() as logs:
        assert ctx.replace_message(0, user("x")) is None
    assert ctx.events == ()
    assert [log["event"] for log in logs] == ["replace outside the transcript ignored"]


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda c: c.replace_message("0", user()), "first must be an int"),
        (lambda c: c.replace_message_range(0, 1.0, user()), "last must be an int"),
        (lambda c: c.replace_message_range(True, 1, user()), "first must be an int"),
        (lambda c: c.replace_message(0, "text"), "replacement must be a message"),
    ],
)
def test_replace_rejects_bad_input(ctx: AgentContext, call: Any, match: str) -> None:
    ctx.add_messages([user("a"), user("b")])
    before = ctx.serialize()
    with pytest.raises(UserError, match=match):
        call(ctx)
    assert ctx.serialize() == before


# -- system prompt overlay ------------------------------------------------------------------


def test_the_system_prompt_overlay_is_applied_but_never_logged(ctx: AgentContext) -> None:
    ctx.add_message(user())
    ctx.put_system_prompt_overlay("be brief")
    assert ctx.model_messages() == [SystemMessage(content="be brief"), user()]
    assert ctx.messages == [user()]
    assert [e.type for e in ctx.events] == ["user_message"]
    ctx.put_system_prompt_overlay("be thorough")  # putting twice replaces
    assert ctx.model_messages() == [SystemMessage(content="be thorough"), user()]
    assert ctx.system_prompt_overlay == "be thorough"
    assert ctx.system_prompt is None  # nothing is logged
    assert len(ctx.events) == 1
    assert "be thorough" not in json.dumps(ctx.serialize())  # nor persisted
    assert AgentContext.deserialize(ctx.serialize()).system_prompt_overlay is None


def test_the_overlay_is_appended_to_the_logged_system_prompt(ctx: AgentContext) -> None:
    ctx.add_messages([SystemMessage(content="You are Ada's assistant."), user()])
    assert ctx.system_prompt == "You are Ada's assistant."  # the logged part
    ctx.put_system_prompt_overlay("Answer in French.")
    assert ctx.model_messages() == [
        SystemMessage(content="You are Ada's assistant.\n\nAnswer in French."),
        user(),
    ]
    assert ctx.messages[0] == SystemMessage(content="You are Ada's assistant.")  # log unchanged
    ctx.put_system_prompt_overlay(None)
    assert ctx.model_messages() == ctx.messages
    ctx.put_system_prompt_overlay("")  # empty is no overlay
    assert (ctx.system_prompt_overlay, ctx.model_messages()) == (None, ctx.messages)


def test_an_overlay_the_logged_prompt_already_ends_with_is_not_repeated(
    ctx: AgentContext,
) -> None:
    # A session logged before instructions became an overlay holds them in its system message.
    ctx.add_messages([SystemMessage(content="Be brief.\n\nAnswer in JSON."), user()])
    ctx.put_system_prompt_overlay("Answer in JSON.")
    assert ctx.model_messages() == ctx.messages


def test_a_system_message_that_is_not_leading_is_not_the_system_prompt(
    ctx: AgentContext,
) -> None:
    ctx.add_messages([user(), SystemMessage(content="late")])
    ctx.put_system_prompt_overlay("overlay")
    assert ctx.system_prompt is None
    assert ctx.model_messages()[0] == SystemMessage(content="overlay")


def test_a_bad_overlay_is_refused_and_changes_nothing(ctx: AgentContext) -> None:
    ctx.put_system_prompt_overlay("sys")
    with pytest.raises(UserError, match="overlay must be a string or None"):
        ctx.put_system_prompt_overlay(["sys"])  # type: ignore[arg-type]
    assert ctx.system_prompt_overlay == "sys"


# -- iterations -----------------------------------------------------------------------------


def test_iterations_count_step_starts_and_reset_at_turn_start(clock: FakeClock) -> None:
    ctx = AgentContext(max_iterations=2, clock=clock)
    ctx.log_event("turn_start", {"run_id": "r1"})
    assert (ctx.iteration, ctx.run_id) == (0, "r1")
    event = ctx.increment_iteration(step=1)
    assert (event.type, event.data) == ("step_start", {"step": 1, "iteration": 1})
    assert not ctx.max_iterations_reached()
    ctx.increment_iteration()
    assert ctx.iteration == 2
    assert ctx.max_iterations_reached()
    assert rebuilt(ctx).iteration == 2
    ctx.log_event("turn_start", {"run_id": "r2"})
    assert (ctx.iteration, ctx.run_id) == (0, "r2")
    assert not ctx.max_iterations_reached()


def test_increment_iteration_owns_the_iteration(ctx: AgentContext) -> None:
    event = ctx.increment_iteration(iteration=99)
    assert event.data["iteration"] == 1
    with pytest.raises(UserError, match="not JSON-serializable"):
        ctx.increment_iteration(when=object())
    assert ctx.iteration == 1


# -- dangling tool calls --------------------------------------------------------------------


def test_patch_dangling_tool_calls_answers_each_open_call_once(ctx: AgentContext) -> None:
    other = ToolCall(id="c2", name="write")
    third = ToolCall(id="c3", name="write")
    ctx.add_messages([user(), assistant("", CALL, other), result(CALL), assistant("", third)])
    patched = ctx.patch_dangling_tool_calls()
    assert patched == [other, third]
    assert ctx.messages[-2:] == [
        ToolResultMessage(
            tool_call_id="c2", tool_name="write", content=INTERRUPTED_NOT_STARTED, is_error=True
        ),
        ToolResultMessage(
            tool_call_id="c3", tool_name="write", content=INTERRUPTED_NOT_STARTED, is_error=True
        ),
    ]
    assert INTERRUPTED_NOT_STARTED == (
        "Tool call was interrupted and not executed. Please retry if needed."
    )
    assert [e.data.get("source") for e in ctx.events[-2:]] == ["recovery", "recovery"]
    before = ctx.serialize()
    assert ctx.patch_dangling_tool_calls() == []  # idempotent
    assert ctx.serialize() == before


def test_patch_with_custom_text(ctx: AgentContext) -> None:
    ctx.add_message(assistant("", CALL))
    ctx.patch_dangling_tool_calls(lambda call: f"{call.name} was cancelled")
    assert ctx.last_message == ToolResultMessage(
        tool_call_id="c1", tool_name="search", content="search was cancelled", is_error=True
    )


def test_a_failing_patch_text_changes_nothing(ctx: AgentContext) -> None:
    ctx.add_message(assistant("", CALL, ToolCall(id="c2", name="write")))
    before = ctx.serialize()

    def text(call: ToolCall) -> str:
        if call.id == "c2":
            raise RuntimeError("boom")
        return "x"

    with pytest.raises(RuntimeError, match="boom"):
        ctx.patch_dangling_tool_calls(text)
    assert ctx.serialize() == before


def test_suspended_calls_are_not_dangling(ctx: AgentContext) -> None:
    ctx.add_message(assistant("", CALL))
    ctx.log_event(
        "suspended",
        {"request": {"id": "req-1", "kind": "input"}, "tool_call": CALL.model_dump(mode="json")},
    )
    assert list(ctx.suspended) == ["req-1"]
    assert ctx.patch_dangling_tool_calls() == []
    ctx.log_event("resumed", {"request_id": "req-1"})
    assert ctx.suspended == {}
    assert ctx.dangling_tool_calls() == [CALL]


# -- RunContext -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    region: str


def test_run_context_for_a_call(clock: FakeClock) -> None:
    ctx = AgentContext("child", parent_id="root", metadata={"notes": ["a"]}, clock=clock)
    ctx.log_event("turn_start", {"run_id": "run-1"})
    ctx.add_usage(Usage(requests=1))
    db = object()
    deps = {"db": db}
    run = ctx.run_context(CALL, tool_context=deps, retry=2, timeout=3.5)
    assert run.tool_context == deps  # a read-only view of the caller's mapping
    assert run.tool_context["db"] is db  # whose objects are handed over as they are
    with pytest.raises(ToolContextReadOnlyError, match=r"tool_context\['db'\] is read-only"):
        run.tool_context["db"] = None
    assert deps == {"db": db}
    config = Config(region="eu")  # not a mapping: passed as it is
    assert ctx.run_context(CALL, tool_context=config).tool_context is config
    assert (run.agent_id, run.parent_id, run.run_id) == ("child", "root", "run-1")
    assert (run.tool_call_id, run.tool_name, run.retry, run.timeout) == ("c1", "search", 2, 3.5)
    assert run.usage == Usage(requests=1)
    assert run.metadata == {"notes": ("a",)}
    assert run.answer is None
    assert not run.cancelled


def test_run_context_metadata_is_a_deep_read_only_snapshot(ctx: AgentContext) -> None:
    ctx.apply_update(ContextUpdate().set("prefs", {"tags": ["x"], "ui": {"dark": False}}))
    run = ctx.run_context(CALL)
    prefs = run.metadata["prefs"]
    assert isinstance(run.metadata, MappingProxyType)
    assert isinstance(prefs, MappingProxyType)
    assert prefs["tags"] == ("x",)
    with pytest.raises(TypeError):
        run.metadata["new"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        prefs["ui"]["dark"] = True
    with pytest.raises(AttributeError):
        prefs["tags"].append("y")
    # later changes of the agent do not reach a snapshot already handed out
    ctx.apply_update(ContextUpdate().merge("prefs", {"ui": {"dark": True}}))
    assert run.metadata["prefs"]["ui"]["dark"] is False


def test_a_step_shares_one_snapshot(ctx: AgentContext) -> None:
    snapshot = ctx.metadata_snapshot()
    first = ctx.run_context(CALL, metadata=snapshot)
    second = ctx.run_context(ToolCall(id="c2", name="write"), metadata=snapshot)
    assert first.metadata is second.metadata is snapshot


def test_the_default_tool_context_is_an_empty_read_only_mapping(ctx: AgentContext) -> None:
    run = ctx.run_context(CALL)
    assert run.tool_context == {}
    with pytest.raises(TypeError):
        run.tool_context["k"] = 1  # type: ignore[index]


def test_run_context_needs_a_tool_call(ctx: AgentContext) -> None:
    with pytest.raises(UserError, match="run_context takes a ToolCall"):
        ctx.run_context({"id": "c1"})  # type: ignore[arg-type]


# -- rebuilding from events -----------------------------------------------------------------


def test_from_events_rejects_what_is_not_an_event() -> None:
    with pytest.raises(UserError, match="from_events takes Events, got dict at 0"):
        AgentContext.from_events([{"seq": 0}])  # type: ignore[list-item]


def test_from_events_rejects_a_payload_it_cannot_fold() -> None:
    bad = Event(seq=0, type="usage", data={"requests": "many"}, created_at=START)
    with pytest.raises(UserError, match=r"event 0 \(usage\) has a malformed payload"):
        AgentContext.from_events([bad])


# -- property: the projection ---------------------------------------------------------------

positions = st.integers(-1, 6)
actions = st.one_of(
    st.tuples(st.just("add"), messages),
    st.tuples(st.just("replace"), positions, messages),
    st.tuples(st.just("range"), positions, positions, messages),
    st.tuples(st.just("note"), st.just(None)),
)


_MESSAGE_CLASSES: dict[str, type[Message]] = {
    "system": SystemMessage,
    "user": UserMessage,
    "assistant": AssistantMessage,
    "tool": ToolResultMessage,
}


def parse(data: dict[str, Any]) -> Message:
    fields = {key: value for key, value in data.items() if key != "source"}
    return _MESSAGE_CLASSES[fields["role"]].model_validate(fields)


def naive_projection(events: tuple[Event, ...]) -> list[Message]:
    """What the issue says the log means, written as plainly as possible."""
    out: list[Message] = []
    for event in events:
        if event.type in {"system_message", "user_message", "assistant_message", "tool_result"}:
            out.append(parse(event.data))
        elif event.type == "replace":
            first, last = event.data["first"], event.data["last"]
            if 0 <= first <= last < len(out):
                out[first : last + 1] = [parse(event.data["message"])]
    return out


@settings(max_examples=150, deadline=None)
@given(st.lists(actions, max_size=12))
def test_messages_are_always_the_projection_of_the_log(actions: list[tuple[Any, ...]]) -> None:
    ctx = AgentContext(clock=FakeClock())
    model: list[Message] = []  # the transcript as a user of the API expects it
    with capture_logs():
        for action in actions:
            if action[0] == "add":
                ctx.add_message(action[1], source="s" if len(model) % 2 else None)
                model.append(action[1])
            elif action[0] == "replace":
                _, index, message = action
                ctx.replace_message(index, message)
                if 0 <= index < len(model):
                    model[index] = message
            elif action[0] == "range":
                _, first, last, message = action
                ctx.replace_message_range(first, last, message)
                if 0 <= first <= last < len(model):
                    model[first : last + 1] = [message]
            else:
                ctx.log_event("app.note", {"n": len(model)})
            assert ctx.messages == model
        fresh = AgentContext.from_events(ctx.events)
    assert fresh.messages == ctx.messages
    assert fresh.entries == ctx.entries
    assert fresh.needs_response == ctx.needs_response
    assert naive_projection(ctx.events) == ctx.messages
    assert [e.seq for e in ctx.events] == list(range(len(ctx.events)))


# -- property: updates on a context ---------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(json_dicts, st.lists(st.lists(operations, max_size=4), max_size=4))
def test_updates_on_a_context_match_the_reference_model(
    initial: dict[str, Any], updates: list[list[tuple[str, str, Any]]]
) -> None:
    ctx = AgentContext(metadata=initial, clock=FakeClock())
    expected = ctx.metadata
    for ops in updates:
        before = ctx.serialize()
        try:
            expected = ref_fold(expected, ops)
        except RefError:
            with pytest.raises(InvalidUpdateError):
                ctx.apply_update(build_update(ops))
            assert ctx.serialize() == before
        else:
            ctx.apply_update(build_update(ops))
            # metadata operations first, as one context_update event; then the events in order
            # metadata operations first, as one context_update event; then the events in
            # order; then the peer messages, numbered on from the agent's earlier sends
            new = ctx.events[len(before["events"]) :]
            touches = any(op[0] not in ("log_event", "send") for op in ops)
            logged = [op[1] for op in ops if op[0] == "log_event"]
            sent = [op[1] for op in ops if op[0] == "send"]
            assert [e.type for e in new] == (
                ["context_update"] * touches + logged + ["message_sent"] * len(sent)
            )
            assert [e.data["to"] for e in new if e.type == "message_sent"] == sent
        assert ctx.metadata == expected
    rebuilt = AgentContext.from_events(ctx.events)
    assert rebuilt.metadata == expected
    numbers = [e.data["n"] for e in ctx.events if e.type == "message_sent"]
    assert numbers == list(range(1, len(numbers) + 1))
    assert rebuilt.sent_messages == ctx.sent_messages == len(numbers)


def test_a_usage_that_cannot_be_added_changes_nothing() -> None:
    ctx = AgentContext()
    ctx.add_usage(Usage(requests=1, input_tokens=3))
    broken = Usage.model_construct(requests=1, input_tokens=None)  # skipped validation
    with pytest.raises(TypeError):
        ctx.add_usage(broken)
    assert ctx.usage == Usage(requests=1, input_tokens=3)
    assert [e.type for e in ctx.events] == ["usage"]
    ctx.add_usage(Usage(requests=1))
    assert ctx.usage == Usage(requests=2, input_tokens=3)
