"""Snapshots of a context's fold: a context from a snapshot and its tail equals the whole fold."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from actors.context._agent_context import AgentContext
from actors.context._events import Event
from actors.context._messages import AssistantMessage, ToolCall, ToolResultMessage, UserMessage
from actors.context._snapshot import SNAPSHOT_VERSION, from_snapshot, take_snapshot
from actors.context._update import ContextUpdate
from actors.context._usage import Usage

from .helpers import FakeClock, json_dicts, messages


def _fold_state(ctx: AgentContext) -> dict[str, Any]:
    """Everything a fold gives, as a user and the runtime read it."""
    return {
        "entries": ctx.entries,
        "metadata": ctx.metadata,
        "usage": ctx.usage,
        "iteration": ctx.iteration,
        "needs_response": ctx.needs_response,
        "run_id": ctx.run_id,
        "suspended": ctx.suspended,
        "sent": ctx.sent_messages,
        "heard": ctx.last_heard("peer"),
        "system_prompt": ctx.system_prompt,
        "event_count": ctx.event_count,
        "open_turn": ctx._open_turn,
        "turn_seq": ctx._turn_seq,
        "turns": ctx._turns,
        "spawned": ctx._spawned,
        "kept": (ctx._kept_ids, ctx._kept_names, ctx._children_spawned),
    }


def _stored(ctx: AgentContext) -> list[dict[str, Any]]:
    """The log as a store gives it back (JSON text and back)."""
    return [json.loads(json.dumps(e.model_dump(mode="json"))) for e in ctx.events]


def _resumed(
    snapshot: dict[str, Any], log: list[dict[str, Any]], reads: list[int] | None = None
) -> AgentContext | None:
    snapshot = json.loads(json.dumps(snapshot))  # as a store keeps it

    def read_before(stop: int) -> list[Event]:
        if reads is not None:
            reads.append(stop)
        return [Event.model_validate(raw) for raw in log[:stop]]

    seq = snapshot.get("seq")
    return from_snapshot(
        snapshot,
        log[seq if isinstance(seq, int) else 0 :],  # what a store reads from its seq
        read_before=read_before,
        agent_id="agent",
        clock=FakeClock(),
    )


# One step of an agent's life: what the loop and tools append.
_steps = st.one_of(
    st.tuples(st.just("message"), messages),
    st.tuples(st.just("update"), json_dicts),
    st.tuples(st.just("usage"), st.integers(0, 3), st.integers(0, 50)),
    st.tuples(st.just("turn_start"), st.sampled_from(["r1", "r2"])),
    st.tuples(st.just("turn_end"), st.just("r")),
    st.tuples(st.just("spawn"), st.sampled_from(["k1", "k2", "k3"]), st.booleans()),
    st.tuples(st.just("suspend"), st.sampled_from(["q1", "q2"])),
    st.tuples(st.just("resume"), st.sampled_from(["q1", "q2"])),
    st.tuples(st.just("peer"), st.integers(1, 4)),
    st.tuples(st.just("replace"), st.integers(0, 3), messages),
    st.tuples(st.just("step"), st.just(0)),
)


def _apply(ctx: AgentContext, step: tuple[Any, ...]) -> None:
    kind = step[0]
    if kind == "message":
        ctx.add_message(step[1])
    elif kind == "update":
        update = ContextUpdate()
        for key, value in step[1].items():
            update = update.set(key, value)
        ctx.apply_update(update.send("peer", "hi"))
    elif kind == "usage":
        ctx.add_usage(Usage(requests=step[1], input_tokens=step[2]))
    elif kind in ("turn_start", "turn_end"):
        ctx.log_event(kind, {"run_id": step[1]})
    elif kind == "spawn":
        ctx.log_event("subagent_spawned", {"child_id": step[1], "name": "helper", "keep": step[2]})
    elif kind == "suspend":
        call = ToolCall(id=f"call-{step[1]}", name="approve", arguments={})
        ctx.log_event(
            "suspended",
            {"request": {"id": step[1], "kind": "approval"}, "tool_call": call.model_dump()},
        )
    elif kind == "resume":
        ctx.log_event("resumed", {"request_id": step[1]})
    elif kind == "peer":
        ctx.log_event(
            "message_received", {"from": "peer", "n": step[1], "content": "x", "message_id": "m"}
        )
    elif kind == "replace":
        ctx.replace_message_range(0, step[1], step[2])
    else:
        ctx.increment_iteration()


@settings(max_examples=120, deadline=None)
@given(
    before=st.lists(_steps, min_size=1, max_size=25),
    after=st.lists(_steps, max_size=15),
)
def test_a_snapshot_and_its_tail_fold_like_the_whole_log(
    before: list[tuple[Any, ...]], after: list[tuple[Any, ...]]
) -> None:
    live = AgentContext(clock=FakeClock(), metadata={"start": 1})  # one event at least
    with capture_logs():
        for step in before:
            _apply(live, step)
        snapshot = take_snapshot(live)
        for step in after:
            _apply(live, step)
        resumed = _resumed(snapshot, _stored(live))
        whole = AgentContext.deserialize(live.serialize(), clock=FakeClock())
    assert resumed is not None
    assert _fold_state(resumed) == _fold_state(whole) == _fold_state(live)
    assert resumed.model_messages() == whole.model_messages()
    assert resumed.events == whole.events  # the start of the log read on demand


def test_the_start_of_the_log_is_read_once_and_only_when_asked() -> None:
    live = AgentContext(clock=FakeClock())
    for n in range(50):
        live.add_message(UserMessage(content=f"m{n}"))
    snapshot = take_snapshot(live)
    live.add_message(AssistantMessage(content="after"))
    reads: list[int] = []
    resumed = _resumed(snapshot, _stored(live), reads)
    assert resumed is not None
    assert resumed.message_count == 51
    assert resumed.events_since(50)[0].data["content"] == "after"  # the tail: no read
    resumed.add_message(UserMessage(content="new"))
    assert resumed.event_count == 52
    assert reads == []
    assert [e.seq for e in resumed.events] == list(range(52))
    assert resumed.events_since(3)[0].data["content"] == "m3"
    assert reads == [49]  # once, for every event before the snapshot's


def test_a_snapshot_of_a_suspended_turn_reads_the_turn_again() -> None:
    # A restore scans the open turn (calls without results, children it waits on): those
    # events come with the snapshot, not from a read of the whole log.
    live = AgentContext(clock=FakeClock())
    for n in range(20):
        live.add_message(UserMessage(content=f"old {n}"))
    live.log_event("turn_start", {"run_id": "r"})
    start = live.event_count - 1
    live.add_message(UserMessage(content="send it?"))
    call = ToolCall(id="c1", name="approve", arguments={})
    live.add_message(AssistantMessage(content="", tool_calls=(call,)))
    live.add_tool_call(call)
    snapshot = take_snapshot(live)
    assert snapshot["seq"] == start
    reads: list[int] = []
    resumed = _resumed(snapshot, _stored(live), reads)
    assert resumed is not None
    assert [e.type for e in resumed.events_since(start)][:2] == ["turn_start", "user_message"]
    assert resumed.dangling_tool_calls() == [call]
    assert reads == []


def _snapshot_and_log() -> tuple[dict[str, Any], list[dict[str, Any]], AgentContext]:
    live = AgentContext(clock=FakeClock())
    for n in range(5):
        live.add_message(UserMessage(content=f"m{n}"))
    snapshot = take_snapshot(live)
    live.add_message(ToolResultMessage(tool_call_id="x", tool_name="t", content="r"))
    return snapshot, _stored(live), live


def test_a_snapshot_that_does_not_fit_its_log_is_ignored() -> None:
    snapshot, log, _ = _snapshot_and_log()
    other = dict(log[4], data={"role": "user", "content": "changed"})
    unfit = {
        "another event at its seq": (snapshot, [*log[:4], other, *log[5:]]),
        "an older format": ({**snapshot, "version": SNAPSHOT_VERSION + 1}, log),
        "no version": ({k: v for k, v in snapshot.items() if k != "version"}, log),
        "past the log": ({**snapshot, "seq": 9, "folded": 9}, log),
        "another agent": ({**snapshot, "agent_id": "other"}, log),
        "a broken transcript": ({**snapshot, "seqs": [0]}, log),
        "garbage": ({"version": SNAPSHOT_VERSION, "seq": 4, "folded": "x"}, log),
        "unreadable": ({}, log),
        "a message that is not one": (
            {**snapshot, "messages": [{"role": "nobody"}] * 5},
            log,
        ),
    }
    for label, (bad, stored) in unfit.items():
        with capture_logs() as logs:
            assert _resumed(bad, stored) is None, label
        assert [entry["event"] for entry in logs] == ["snapshot ignored"], label
        assert logs[0]["log_level"] == "debug"


def test_events_after_the_snapshot_are_folded_on_top() -> None:
    # A crash after events were appended and before the next snapshot: the older snapshot
    # still fits, and the events after it are folded.
    snapshot, log, live = _snapshot_and_log()
    resumed = _resumed(snapshot, log)
    assert resumed is not None
    assert resumed.messages == live.messages
    assert resumed.needs_response is True
