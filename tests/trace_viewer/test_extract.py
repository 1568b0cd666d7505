"""Reading stored sessions into spans and markers: what each kind of run looks like."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from actors import Agent, AgentContext, Answer, ContextUpdate, RunContext, tool
from actors.store import MemoryStore
from actors.testing import FunctionModel, ScriptedModel, call
from actors.trace import Span, Trace, build_trace

from .sessions import (
    cancelled,
    crashed_and_restored,
    demo_session,
    session_of,
    suspended_then,
)


def kinds(spans: tuple[Span, ...]) -> list[tuple[str, str, str]]:
    return [(s.kind, s.label, s.status) for s in spans]


def types(trace: Trace, agent_id: str, span: Span) -> list[str]:
    events = {e.seq: e for e in trace.lane(agent_id).events}
    return [events[seq].type for seq in span.seqs]


@pytest.fixture(scope="module")
def demo() -> Trace:
    with MemoryStore() as store:
        return build_trace(demo_session(store))


def test_one_lane_per_agent_parents_before_children(demo: Trace) -> None:
    assert [(lane.agent_id, lane.depth, lane.parent_id) for lane in demo.lanes] == [
        ("lead", 0, None),
        ("lead-sub-1", 1, "lead"),
        ("lead-sub-2", 1, "lead"),
        ("lead-sub-3", 1, "lead"),
        ("lead-sub-4", 1, "lead"),
    ]
    assert [lane.name for lane in demo.lanes] == [
        "lead", "web_researcher", "paper_researcher", "benchmark_researcher", "writer"
    ]  # fmt: skip


def test_the_lead_has_a_turn_three_model_requests_and_four_subagent_calls(demo: Trace) -> None:
    lead = demo.lane("lead")
    assert kinds(lead.spans) == [
        ("turn", "lead-run-1", "ok"),
        ("model", "scripted-lead", "ok"),
        ("subagent", "web_researcher → lead-sub-1", "ok"),
        ("subagent", "paper_researcher → lead-sub-2", "ok"),
        ("subagent", "benchmark_researcher → lead-sub-3", "ok"),
        ("model", "scripted-lead", "ok"),
        ("subagent", "writer → lead-sub-4", "ok"),
        ("model", "scripted-lead", "ok"),
    ]
    turn = lead.spans[0]
    assert turn.seqs == tuple(e.seq for e in lead.events)  # the run is the whole log
    assert (turn.start, turn.end) == (lead.events[0].created_at, lead.events[-1].created_at)
    calls = [s for s in lead.spans if s.kind == "subagent"]
    assert [s.child_id for s in calls] == ["lead-sub-1", "lead-sub-2", "lead-sub-3", "lead-sub-4"]
    assert types(demo, "lead", calls[0]) == [
        "subagent_spawned", "tool_call", "subagent_finished", "tool_result"
    ]  # fmt: skip


def test_a_model_request_spans_step_start_to_step_end(demo: Trace) -> None:
    model = demo.lane("lead-sub-1").spans[1]
    assert types(demo, "lead-sub-1", model) == [
        "step_start", "request_header", "usage", "assistant_message", "step_end"
    ]  # fmt: skip
    events = {e.seq: e for e in demo.lane("lead-sub-1").events}
    assert (model.start, model.end) == (
        events[model.seqs[0]].created_at,
        events[model.seqs[-1]].created_at,
    )
    assert model.end > model.start


def test_parallel_tool_calls_each_have_a_span_with_their_update(demo: Trace) -> None:
    reads = [s for s in demo.lane("lead-sub-2").spans if s.label == "read_abstract"]
    assert len(reads) == 2
    assert all(s.start < reads[1].end for s in reads)  # they overlap: they ran side by side
    assert types(demo, "lead-sub-2", reads[0]) == ["tool_call", "context_update", "tool_result"]


def test_the_approval_shows_as_a_suspension_then_a_resume_inside_the_tool_call(
    demo: Trace,
) -> None:
    lane = demo.lane("lead-sub-3")
    assert [(m.kind, m.label) for m in lane.markers] == [
        (
            "suspended",
            "approval lead-sub-3-req-8: Allow the tool 'run_benchmark' to run?",
        ),
        ("resumed", "lead-sub-3-req-8 approved"),
    ]
    (tool_span,) = [s for s in lane.spans if s.kind == "tool"]
    assert types(demo, "lead-sub-3", tool_span) == [
        "suspended", "resumed", "tool_call", "context_update", "tool_result"
    ]  # fmt: skip
    assert tool_span.status == "ok"


def test_usage_per_agent_and_for_the_tree_is_the_contexts_usage() -> None:
    with MemoryStore() as store:
        session = demo_session(store)
    trace = build_trace(session)
    for agent in session.agents:
        assert trace.lane(agent.agent_id).usage == AgentContext.deserialize(agent.context).usage
    assert trace.usage.requests == 12
    assert trace.usage.tool_calls == 10
    assert trace.event_count == sum(len(a.context["events"]) for a in session.agents)


@pytest.mark.parametrize(
    ("cut_after", "cut_short", "recovered"),
    [
        ("tool_call", ("tool", "record"), "recorder-run-1, 1 outcome unknown"),
        ("request_header", ("model", "scripted"), "recorder-run-1"),
    ],
)
def test_a_crash_recovered_turn_is_interrupted_where_the_process_died(
    cut_after: str, cut_short: tuple[str, str], recovered: str
) -> None:
    trace = build_trace(crashed_and_restored(cut_after))
    lane = trace.lane("recorder")
    turn = lane.spans[0]
    assert (turn.kind, turn.label, turn.status) == (
        "turn",
        "recorder-run-1 (interrupted)",
        "interrupted",
    )
    assert types(trace, "recorder", turn)[-2:] == ["recovered", "turn_end"]
    # Restored 5 s after the crash: the turn lasts until recovery closed it.
    assert turn.end - turn.start > timedelta(seconds=5)
    interrupted = [s for s in lane.spans if s.status == "interrupted" and s.kind != "turn"]
    assert [(s.kind, s.label) for s in interrupted] == [cut_short]
    assert [(m.kind, m.label) for m in lane.markers] == [("recovered", recovered)]


def test_a_suspended_run_leaves_its_turn_and_call_suspended_to_the_end_of_the_log() -> None:
    trace = build_trace(suspended_then(None))
    lane = trace.lane("janitor")
    assert lane.status == "suspended"
    assert kinds(lane.spans) == [
        ("turn", "janitor-run-1", "suspended"),
        ("model", "scripted", "ok"),
        ("tool", "delete_file", "suspended"),
    ]
    last = lane.events[-1].created_at
    assert lane.spans[0].end == last
    assert lane.spans[2].end == last  # waiting, as far as the log knows
    assert [m.kind for m in lane.markers] == ["suspended"]


def test_a_declined_approval_resumes_and_the_call_ends_with_an_error_result() -> None:
    trace = build_trace(suspended_then(Answer(ok=False, reason="not today")))
    lane = trace.lane("janitor")
    assert [(m.kind, m.label) for m in lane.markers] == [
        ("suspended", "approval janitor-req-7: Allow the tool 'delete_file' to run?"),
        ("resumed", "janitor-req-7 declined"),
    ]
    assert kinds(lane.spans) == [
        ("turn", "janitor-run-1", "ok"),
        ("model", "scripted", "ok"),
        ("tool", "delete_file", "error"),
        ("model", "scripted", "ok"),
    ]


def test_a_cancelled_run_marks_the_cancel_and_the_steering_and_cuts_the_call() -> None:
    trace = build_trace(cancelled())
    lane = trace.lane("worker")
    assert kinds(lane.spans) == [
        ("turn", "worker-run-1 (cancelled)", "cancelled"),
        ("model", "scripted", "ok"),
        ("tool", "work", "cancelled"),
    ]
    assert [(m.kind, m.label) for m in lane.markers] == [
        ("steered", "and hurry"),
        ("cancelled", "user left"),
    ]


def test_a_failing_model_is_an_error_step_an_error_marker_and_an_error_turn() -> None:
    def broken(messages: Any, tools: Any) -> Any:
        raise RuntimeError("the provider is down")

    trace = build_trace(session_of(Agent("a", model=FunctionModel(broken)), "hi"))
    lane = trace.lane("a")
    assert kinds(lane.spans) == [
        ("turn", "a-run-1 (error)", "error"),
        ("model", "function: RuntimeError", "error"),
    ]
    ((kind, label),) = [(m.kind, m.label) for m in lane.markers]
    assert kind == "error"
    assert label.startswith("RunFailedError: agent 'a': the model failed: RuntimeError")


def test_a_call_refused_before_it_ran_is_a_one_event_error_span() -> None:
    agent = Agent("a", model=ScriptedModel([call("no_such_tool"), "sorry"]))
    trace = build_trace(session_of(agent, "hi"))
    (refused,) = [s for s in trace.lane("a").spans if s.kind == "tool"]
    assert (refused.label, refused.status, refused.start == refused.end) == (
        "no_such_tool",
        "error",
        True,
    )
    assert types(trace, "a", refused) == ["tool_result"]


def test_a_child_delegated_from_a_tool_is_a_subagent_span_and_a_lane() -> None:
    worker = Agent("worker", model=ScriptedModel(["worked"]))

    @tool
    def orchestrate(ctx: RunContext[Any]) -> str:
        """Hand the job to a worker."""
        return str(ctx.delegate(worker, "the job"))

    boss = Agent("boss", model=ScriptedModel([call("orchestrate"), "done"]), tools=[orchestrate])
    trace = build_trace(session_of(boss, "go"))
    assert [lane.agent_id for lane in trace.lanes] == ["boss", "boss-sub-1"]
    (delegated,) = [s for s in trace.lane("boss").spans if s.kind == "subagent"]
    assert (delegated.label, delegated.status, delegated.child_id) == (
        "worker → boss-sub-1",
        "ok",
        "boss-sub-1",
    )
    assert types(trace, "boss", delegated) == ["subagent_spawned", "subagent_finished"]


def test_user_events_are_markers() -> None:
    @tool
    def note() -> tuple[str, ContextUpdate]:
        """Take a note."""
        return "noted", ContextUpdate().log_event("app.note", {"text": "remember me"})

    agent = Agent("a", model=ScriptedModel([call("note"), "ok"]), tools=[note])
    trace = build_trace(session_of(agent, "hi"))
    assert [(m.kind, m.label) for m in trace.lane("a").markers] == [("custom", "app.note")]


def test_a_session_without_events_is_an_empty_trace() -> None:
    with MemoryStore() as store:
        store.create_session("empty", root_agent_id="root")
        trace = build_trace(store.load("empty"))
    assert (trace.lanes, trace.start, trace.end, trace.event_count) == ((), None, None, 0)


def test_a_compaction_is_a_marker_and_the_shadowed_events_stay_in_the_trace() -> None:
    from actors import Compaction, Runtime

    def reply(messages: list[Any], tools: list[Any]) -> str:
        if "compact the transcript" in messages[0].content:
            return "counted"
        return "ok"

    agent = Agent(
        "counter",
        model=FunctionModel(reply),
        context_window=120,
        compaction=Compaction(keep_last_turns=1),
    )
    store = MemoryStore()
    with Runtime() as runtime:
        ref = runtime.spawn(agent, store=store, session_id="c")
        for n in range(20):
            ref.run(f"number {n}")
    trace = build_trace(store.load("c"))
    (lane,) = trace.lanes
    marks = [m for m in lane.markers if m.kind == "compacted"]
    assert marks
    assert all(m.label.endswith("summarised by function") for m in marks)
    prompts = [e.data["content"] for e in lane.events if e.type == "user_message"]
    assert prompts == [f"number {n}" for n in range(20)]  # shadowed ones included
    compacted = [e for e in lane.events if e.type == "compacted"]
    assert [m.seq for m in marks] == [e.seq for e in compacted]


def test_a_steering_message_with_parts_is_labelled_with_placeholders() -> None:
    from actors.trace._media import content_label

    label = content_label(
        [
            {"type": "text", "text": "look at this"},
            {"type": "image", "media_type": "image/png", "data": "iVBORw0KGgo" + "A" * 1331},
            {"type": "image", "media_type": "image/png", "url": "https://example.com/a.png"},
        ]
    )
    assert label == (
        "look at this [image image/png, 1.0 kB] [image image/png, https://example.com/a.png]"
    )
