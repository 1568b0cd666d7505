"""The transcript as an immutable view: O(1) to take, never changed by what comes after."""

from __future__ import annotations

import copy
import pickle

from actors import AgentContext, AssistantMessage, SystemMessage, UserMessage
from actors.context._message_view import MessageView
from actors.context._update import ContextUpdate


def _fill(ctx: AgentContext, count: int) -> None:
    for n in range(count):
        ctx.add_message(UserMessage(content=f"q{n}"))
        ctx.add_message(AssistantMessage(content=f"a{n}"))


def test_a_view_does_not_see_messages_added_after_it(ctx: AgentContext) -> None:
    _fill(ctx, 2)
    view = ctx.message_view()
    ctx.add_message(UserMessage(content="later"))
    assert len(view) == 4
    assert [m.content for m in view] == ["q0", "a0", "q1", "a1"]
    assert view[-1].content == "a1"
    assert len(ctx.message_view()) == 5


def test_a_view_compares_equal_to_the_same_messages_as_a_tuple_or_list(ctx: AgentContext) -> None:
    _fill(ctx, 2)
    view = ctx.message_view()
    assert view == tuple(ctx.messages)
    assert tuple(ctx.messages) == view
    assert view == ctx.messages
    assert view != tuple(ctx.messages[:-1])
    assert view[1:3] == (ctx.messages[1], ctx.messages[2])
    assert hash(view) == hash(tuple(ctx.messages))


def test_a_view_taken_before_a_replace_keeps_the_messages_it_had(ctx: AgentContext) -> None:
    _fill(ctx, 3)
    before = ctx.message_view()
    ctx.replace_message_range(0, 3, UserMessage(content="summary"))
    assert [m.content for m in before] == ["q0", "a0", "q1", "a1", "q2", "a2"]
    assert [m.content for m in ctx.message_view()] == ["summary", "q2", "a2"]
    assert ctx.message_view() == ctx.messages


def test_a_view_pickles_and_copies_as_a_plain_tuple(ctx: AgentContext) -> None:
    _fill(ctx, 1)
    view = ctx.message_view()
    assert pickle.loads(pickle.dumps(view)) == tuple(view)
    assert type(pickle.loads(pickle.dumps(view))) is tuple
    assert type(copy.deepcopy(view)) is tuple


def test_the_overlay_joins_the_leading_system_message_in_the_view(ctx: AgentContext) -> None:
    ctx.add_message(SystemMessage(content="base"))
    _fill(ctx, 1)
    ctx.put_system_prompt_overlay("overlay")
    shown = ctx.model_messages()
    assert [m.content for m in shown] == ["base\n\noverlay", "q0", "a0"]
    assert [m.content for m in reversed(shown)] == ["a0", "q0", "base\n\noverlay"]
    assert shown[1:] == tuple(ctx.messages[1:])
    assert ctx.messages[0].content == "base"  # the transcript itself is untouched


def test_the_overlay_goes_in_front_of_a_transcript_without_a_system_message(
    ctx: AgentContext,
) -> None:
    _fill(ctx, 1)
    ctx.put_system_prompt_overlay("overlay")
    assert [m.content for m in ctx.model_messages()] == ["overlay", "q0", "a0"]
    assert len(ctx.model_messages()) == 3


def test_events_since_gives_a_runs_events_alone(ctx: AgentContext) -> None:
    _fill(ctx, 1)
    start = ctx.event_count
    ctx.add_message(UserMessage(content="next"))
    (event,) = ctx.events_since(start)
    assert event.seq == start
    assert event.data["content"] == "next"


def test_the_metadata_snapshot_is_shared_until_the_metadata_changes(ctx: AgentContext) -> None:
    ctx.apply_update(ContextUpdate().set("k", [1]))
    first = ctx.metadata_snapshot()
    assert ctx.metadata_snapshot() is first
    ctx.apply_update(ContextUpdate().append("k", 2))
    assert ctx.metadata_snapshot()["k"] == (1, 2)
    assert first["k"] == (1,)  # a snapshot handed out never changes


def test_a_view_of_a_plain_list_works_like_a_tuple() -> None:
    messages = [UserMessage(content="a"), UserMessage(content="b")]
    view = MessageView(messages)
    assert list(view) == messages
    assert view.origin is None
    assert view.index(messages[1]) == 1
    assert messages[0] in view
