"""How runs end, as span statuses and events: failures, cancellation, suspension, sleep."""

from __future__ import annotations

import threading

import pytest
from opentelemetry.trace import StatusCode

from actors import Agent, Answer, Pending, Request, RunContext, Runtime, Subagent, tool
from actors.exceptions import ModelHTTPError, RunFailedError
from actors.store import MemoryStore
from actors.testing import ScriptedModel, call

from .helpers import Spans, attrs, events

BOUND = 30.0


@tool
def divide(a: int, b: int) -> float:
    """Divide.

    Args:
        a: The dividend.
        b: The divisor.
    """
    return a / b


def test_a_failing_tool_is_an_error_span_and_the_run_goes_on(spans: Spans) -> None:
    agent = Agent(
        "calc", model=ScriptedModel([call("divide", a=1, b=0), "Cannot."]), tools=[divide]
    )
    with Runtime() as runtime:
        assert runtime.spawn(agent).run("1/0?").output == "Cannot."

    tool_span = spans.one("execute_tool divide")
    assert tool_span.status.status_code is StatusCode.ERROR
    assert tool_span.status.description is None  # the error text is content: not recorded
    assert attrs(tool_span)["error.type"] == "ZeroDivisionError"
    run = spans.one("invoke_agent calc")
    assert run.status.status_code is StatusCode.UNSET
    assert attrs(run)["actors.run.outcome"] == "completed"


def test_a_refused_call_is_a_moment_with_an_error(spans: Spans) -> None:
    agent = Agent("calc", model=ScriptedModel([call("nope", x=1), "Sorry."]), tools=[divide])
    with Runtime() as runtime:
        runtime.spawn(agent).run("?")
    refused = spans.one("execute_tool nope")
    assert refused.status.status_code is StatusCode.ERROR
    assert refused.start_time == refused.end_time
    assert spans.parent(refused) == spans.one("invoke_agent calc")


def test_a_failed_model_request_fails_the_chat_and_the_run(spans: Spans) -> None:
    failing = ScriptedModel([ModelHTTPError("server error", status_code=500)])
    with Runtime() as runtime, pytest.raises(RunFailedError):
        runtime.spawn(Agent("a", model=failing)).run("Hi")

    chat = spans.one("chat scripted")
    assert chat.status.status_code is StatusCode.ERROR
    assert attrs(chat)["error.type"] == "ModelHTTPError"
    run = spans.one("invoke_agent a")
    assert run.status.status_code is StatusCode.ERROR
    assert attrs(run)["error.type"] == "RunFailedError"
    assert attrs(run)["actors.run.outcome"] == "error"
    (exception,) = run.events
    assert exception.name == "exception"
    assert (exception.attributes or {})["exception.type"] == "RunFailedError"


def test_a_failed_subagent_marks_its_call(spans: Spans) -> None:
    broken = Agent("broken", model=ScriptedModel([ModelHTTPError("down", status_code=503)]))
    lead = Agent(
        "lead",
        model=ScriptedModel([call("broken", task="Try."), "It failed."]),
        subagents=[Subagent(broken)],
    )
    with Runtime() as runtime:
        assert runtime.spawn(lead).run("Go.").output == "It failed."
    call_span = spans.one("execute_tool broken")
    assert call_span.status.status_code is StatusCode.ERROR
    assert attrs(call_span)["error.type"] == "RunFailedError"
    assert attrs(call_span)["actors.subagent.status"] == "failed"
    child = spans.one("invoke_agent broken")
    assert spans.parent(child) == call_span
    assert child.status.status_code is StatusCode.ERROR


started = threading.Event()


@tool
def crunch(ctx: RunContext) -> str:
    """Crunch numbers until cancelled."""
    started.set()
    ctx.cancellation.wait(BOUND)
    return "stopped"


def test_a_cancelled_tree_ends_every_run_with_the_cancellation(spans: Spans) -> None:
    started.clear()
    worker = Agent("worker", model=ScriptedModel([call("crunch"), "Done."]), tools=[crunch])
    boss = Agent(
        "boss", model=ScriptedModel([call("worker", task="Crunch."), "Done."]), subagents=[worker]
    )
    with Runtime() as runtime:
        ref = runtime.spawn(boss)
        future = ref.run_async("Crunch.")
        assert started.wait(BOUND)
        ref.cancel("the user changed their mind")
        assert future.result(BOUND).status == "cancelled"

    boss_run = spans.one("invoke_agent boss")
    assert boss_run.status.status_code is StatusCode.ERROR
    assert boss_run.status.description == "cancelled: the user changed their mind"
    assert attrs(boss_run)["error.type"] == "cancelled"
    assert attrs(boss_run)["actors.run.outcome"] == "cancelled"
    (cancelled,) = boss_run.events
    assert cancelled.name == "actors.cancelled"
    assert (cancelled.attributes or {})["actors.reason"] == "the user changed their mind"

    worker_run = spans.one("invoke_agent worker")
    assert spans.parent(spans.parent(worker_run)) == boss_run  # type: ignore[arg-type]
    assert attrs(worker_run)["actors.run.outcome"] == "cancelled"
    assert "actors.cancelled" in events(worker_run)
    assert spans.one("execute_tool crunch").status.status_code is StatusCode.ERROR


@tool(requires_approval=True)
def deploy(version: str) -> str:
    """Deploy a version.

    Args:
        version: The version.
    """
    return f"deployed {version}"


def ops_team() -> Agent:
    # per_agent: a restored agent's script goes on from where its transcript stands
    ops = Agent(
        "ops",
        model=ScriptedModel([call("deploy", version="1.2"), "Deployed."], per_agent=True),
        tools=[deploy],
    )
    return Agent(
        "lead",
        model=ScriptedModel([call("ops", task="Ship 1.2."), "Shipped."], per_agent=True),
        subagents=[ops],
    )


def test_a_suspended_run_stays_one_span_until_it_is_resumed(spans: Spans) -> None:
    with Runtime() as runtime:
        ref = runtime.spawn(ops_team())
        result = ref.run("Ship it.")
        assert result.status == "suspended"
        assert spans.named("invoke_agent lead") == []  # still open
        (request,) = result.requests
        assert ref.resume({request.id: Answer(ok=True)}).output == "Shipped."

    lead = spans.one("invoke_agent lead")
    ops = spans.one("invoke_agent ops")
    deploy_span = spans.one("execute_tool deploy")
    assert spans.parent(deploy_span) == ops
    assert spans.parent(spans.parent(ops)) == lead  # type: ignore[arg-type]
    assert events(ops) == ["actors.suspended", "actors.resumed"]
    assert events(deploy_span) == ["actors.suspended", "actors.resumed"]
    suspended, resumed = deploy_span.events
    assert (suspended.attributes or {})["actors.request.id"] == request.id
    assert (suspended.attributes or {})["actors.request.kind"] == "approval"
    assert (suspended.attributes or {})["actors.request.approval"] is True
    assert "actors.request.prompt" not in (suspended.attributes or {})  # content
    assert (resumed.attributes or {})["actors.ok"] is True
    # the call waited for its approval inside its span
    assert deploy_span.start_time == suspended.timestamp
    assert all(s.status.status_code is StatusCode.UNSET for s in spans.all)
    assert {s.context.trace_id for s in spans.all} == {lead.context.trace_id}


@tool
def ask_city(ctx: RunContext) -> str | Pending:
    """Ask the user for a city."""
    if ctx.answer is None:
        return Pending(Request(kind="input", prompt="Which city?"))
    return str(ctx.answer.data)


def test_a_suspended_tree_asleep_continues_in_new_spans_when_it_wakes(spans: Spans) -> None:
    asker = Agent(
        "asker", model=ScriptedModel([call("ask_city"), "Paris it is."]), tools=[ask_city]
    )
    lead = Agent(
        "lead", model=ScriptedModel([call("asker", task="Ask."), "Booked."]), subagents=[asker]
    )
    with MemoryStore() as store, Runtime() as runtime:
        ref = runtime.spawn(lead, store=store, session_id="trip")
        (request,) = ref.run("Book a trip.").requests
        assert ref.passivate()
        assert runtime.live_agents() == 0
        asleep = {s.name: s for s in spans.all}
        assert set(asleep) == {
            "invoke_agent lead",
            "invoke_agent asker",
            "chat scripted",
            "execute_tool asker",
            "execute_tool ask_city",
        }
        assert attrs(asleep["invoke_agent lead"])["actors.run.outcome"] == "passivated"
        assert events(asleep["invoke_agent lead"]) == ["actors.passivated"]
        assert ref.resume({request.id: Answer(data="Paris")}).output == "Booked."

    lead_runs = spans.named("invoke_agent lead")
    asker_runs = spans.named("invoke_agent asker")
    assert len(lead_runs) == len(asker_runs) == 2
    woken_lead = next(s for s in lead_runs if attrs(s).get("actors.run.continued"))
    woken_asker = next(s for s in asker_runs if attrs(s).get("actors.run.continued"))
    assert attrs(woken_lead)["actors.run.id"] == "lead-run-1"  # the same run, continued
    assert "actors.activated" in events(woken_lead)
    # the woken child continues under its parent's call, continued too
    call_span = spans.parent(woken_asker)
    assert call_span is not None
    assert call_span.name == "execute_tool asker"
    assert spans.parent(call_span) == woken_lead
    assert attrs(woken_lead)["actors.run.outcome"] == "completed"
    assert "actors.resumed" in events(woken_asker)


def test_a_run_that_wakes_a_sleeping_agent_starts_when_it_woke(spans: Spans) -> None:
    assistant = Agent("assistant", model=ScriptedModel(["Hello!", "Still here."]))
    with MemoryStore() as store, Runtime() as runtime:
        ref = runtime.spawn(assistant, store=store, session_id="chat")
        ref.run("Hi")
        assert ref.passivate()
        ref.run("Still there?")
        log = ref.context().events

    first, second = sorted(spans.named("invoke_agent assistant"), key=lambda s: s.start_time or 0)
    assert events(first) == []
    assert events(second) == ["actors.activated"]
    assert attrs(second)["actors.run.id"] == "assistant-run-2"
    woke = next(e for e in log if e.type == "activated")
    (activated,) = second.events
    assert activated.timestamp == second.start_time
    assert woke.seq < next(e.seq for e in log if e.type == "turn_start" and e.seq > woke.seq)
    assert {first.context.trace_id} != {second.context.trace_id}  # a run is a trace


looking, go_on = threading.Event(), threading.Event()


@tool
def look_around() -> str:
    """Look around until told to go on."""
    looking.set()
    go_on.wait(BOUND)
    return "nothing special"


def test_steering_a_run_is_an_event_of_its_span(spans: Spans) -> None:
    looking.clear()
    go_on.clear()
    agent = Agent(
        "scout", model=ScriptedModel([call("look_around"), "Heading north."]), tools=[look_around]
    )
    with Runtime() as runtime:
        ref = runtime.spawn(agent)
        future = ref.run_async("Explore.")
        assert looking.wait(BOUND)
        ref.send("Go north.")
        go_on.set()
        future.result(BOUND)
    run = spans.one("invoke_agent scout")
    assert events(run) == ["actors.steered"]
    assert run.events[0].attributes == {}  # the message is content


def test_stopping_a_running_agent_ends_its_spans(spans: Spans) -> None:
    started.clear()
    agent = Agent("worker", model=ScriptedModel([call("crunch"), "Done."]), tools=[crunch])
    with Runtime() as runtime:
        ref = runtime.spawn(agent)
        ref.run_async("Crunch.")
        assert started.wait(BOUND)
        ref.stop()
    run = spans.one("invoke_agent worker")
    assert run.status.status_code is StatusCode.ERROR
    assert attrs(run)["error.type"] == "AgentStoppedError"
    assert events(run) == ["actors.released"]
    assert spans.one("execute_tool crunch").status.status_code is StatusCode.ERROR


def test_a_suspended_tree_restored_in_a_new_runtime_continues(spans: Spans) -> None:
    with MemoryStore() as store:
        with Runtime() as runtime:
            ref = runtime.spawn(ops_team(), store=store, session_id="ship")
            (request,) = ref.run("Ship it.").requests
        # the runtime shut down: the open runs ended, still suspended in the store
        lead = spans.one("invoke_agent lead")
        assert attrs(lead)["actors.run.outcome"] == "suspended"
        assert events(lead) == ["actors.released"]
        assert lead.status.status_code is StatusCode.UNSET
        with Runtime() as runtime:
            ref = runtime.restore("ship", store=store, agents=[ops_team()])
            assert ref.resume({request.id: Answer(ok=True)}).output == "Shipped."

    lead_again = spans.one("invoke_agent lead", actors__run__continued=True)
    ops_again = spans.one("invoke_agent ops", actors__run__continued=True)
    assert attrs(lead_again)["actors.run.id"] == attrs(lead)["actors.run.id"]
    call_span = spans.parent(ops_again)
    assert call_span is not None
    assert call_span.name == "execute_tool ops"
    assert spans.parent(call_span) == lead_again
    (deploy_again,) = (s for s in spans.children(ops_again) if s.name == "execute_tool deploy")
    assert events(deploy_again) == ["actors.resumed"]
    assert attrs(lead_again)["actors.run.outcome"] == "completed"
    assert {s.context.trace_id for s in (lead_again, ops_again, deploy_again)} == {
        lead_again.context.trace_id
    }
