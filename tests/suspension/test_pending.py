"""A tool returns Pending: the run suspends, the host answers, the same tool runs again."""

from __future__ import annotations

from typing import Any

import pytest

from actors import Agent, AgentContext, Answer, Pending, Request, RunContext, Runtime, tool
from actors.exceptions import UnknownRequestError, UserError
from actors.testing import ScriptedModel, call

from .helpers import CALLS, ask, events_of, tool_results


@pytest.fixture(autouse=True)
def _clear() -> None:
    CALLS.clear()


@tool
def echo(text: str) -> str:
    """Echo."""
    return text


def test_pending_suspends_the_run_and_the_same_call_resumes_with_the_answer(rt: Runtime) -> None:
    model = ScriptedModel([[call("ask", question="city?"), call("echo", text="meanwhile")], "done"])
    ref = rt.spawn(Agent("a", model=model, tools=[ask, echo]))
    suspended = ref.run("plan a trip")
    assert suspended.status == "suspended"
    assert suspended.suspended
    assert suspended.output is None
    (request,) = suspended.requests
    assert (request.kind, request.prompt, request.data) == ("input", "city?", {"q": "city?"})
    assert request.agent_id == "a"
    assert request.path == ("a",)
    assert request.id
    # The other call of the step still finished; the parked one has no result yet.
    assert [r.content for r in tool_results(suspended.messages)] == ["meanwhile"]
    (event,) = events_of(suspended.events, "suspended")
    assert event["request"]["id"] == request.id
    assert ref.status == "suspended"

    result = ref.resume({request.id: Answer(data="Lyon")})
    assert result.status == "completed"
    assert result.output == "done"
    assert [("city?", None), ("city?", Answer(data="Lyon"))] == CALLS
    results = tool_results(result.messages)
    # The parked call's result comes after the others of its step: it finished later.
    assert [r.content for r in results] == ["meanwhile", "city? -> Lyon"]
    assert events_of(result.events, "resumed") == [{"request_id": request.id, "ok": True}]
    resumed_call = [e for e in events_of(result.events, "tool_call") if e.get("resumed")]
    assert resumed_call[0]["arguments"] == {"question": "city?"}
    model.assert_complete()


def test_request_ids_are_unique_and_survive_serialization(rt: Runtime) -> None:
    model = ScriptedModel([[call("ask", question="a"), call("ask", question="b")]])
    ref = rt.spawn(Agent("a", model=model, tools=[ask]))
    first, second = ref.run("?").requests
    assert first.id != second.id
    restored = AgentContext.deserialize(ref.context().serialize())
    assert sorted(restored.suspended) == sorted([first.id, second.id])
    assert Request.model_validate(restored.suspended[first.id]["request"]) == first


@pytest.mark.parametrize("order", ["ab", "ba"])
def test_two_parallel_suspended_calls_answered_in_either_order(rt: Runtime, order: str) -> None:
    model = ScriptedModel([[call("ask", question="a"), call("ask", question="b")], "done"])
    ref = rt.spawn(Agent("p", model=model, tools=[ask]))
    requests = {r.prompt: r for r in ref.run("?").requests}
    first, second = order
    partial = ref.resume({requests[first].id: Answer(data=first.upper())})
    # Answering one leaves the other open.
    assert partial.status == "suspended"
    assert [r.id for r in partial.requests] == [requests[second].id]
    result = ref.resume({requests[second].id: Answer(data=second.upper())})
    assert result.status == "completed"
    contents = sorted(r.content for r in tool_results(result.messages))
    assert contents == ["a -> A", "b -> B"]


def test_answering_both_at_once(rt: Runtime) -> None:
    model = ScriptedModel([[call("ask", question="a"), call("ask", question="b")], "done"])
    ref = rt.spawn(Agent("p", model=model, tools=[ask]))
    answers = {r.id: Answer(data=r.prompt * 2) for r in ref.run("?").requests}
    result = ref.resume(answers)
    assert [r.content for r in tool_results(result.messages)] == ["a -> aa", "b -> bb"]


def test_a_tool_may_suspend_again_on_resume(rt: Runtime) -> None:
    @tool
    def two_questions(ctx: RunContext) -> Any:  # type: ignore[type-arg]
        """Ask twice."""
        if ctx.answer is None:
            return Pending(Request(prompt="first?"))
        if ctx.answer.data == "1":
            return Pending(Request(prompt="second?"))
        return f"got {ctx.answer.data}"

    model = ScriptedModel([call("two_questions"), "done"])
    ref = rt.spawn(Agent("p", model=model, tools=[two_questions]))
    (first,) = ref.run("?").requests
    again = ref.resume({first.id: Answer(data="1")})
    (second,) = again.requests
    assert second.prompt == "second?"
    assert second.id != first.id
    assert ref.resume({second.id: Answer(data="2")}).output == "done"


def test_unknown_or_answered_ids_raise_and_change_nothing(rt: Runtime) -> None:
    model = ScriptedModel([[call("ask", question="a"), call("ask", question="b")], "done"])
    ref = rt.spawn(Agent("p", model=model, tools=[ask]))
    a, b = ref.run("?").requests
    before = ref.context().events
    with pytest.raises(UnknownRequestError, match="no-such-id"):
        ref.resume({"no-such-id": Answer()})
    # A known id together with an unknown one: nothing is applied.
    with pytest.raises(UnknownRequestError):
        ref.resume({a.id: Answer(data="x"), "no-such-id": Answer()})
    with pytest.raises(UnknownRequestError, match="no answers"):
        ref.resume({})
    with pytest.raises(UnknownRequestError, match="Answer"):
        ref.resume({a.id: "yes"})  # type: ignore[dict-item]
    assert ref.context().events == before
    assert len(CALLS) == 2
    ref.resume({a.id: Answer(data="x")})
    with pytest.raises(UnknownRequestError, match="already answered"):
        ref.resume({a.id: Answer(data="again")})
    assert ref.resume({b.id: Answer(data="y")}).status == "completed"


def test_resume_of_an_idle_agent_is_an_unknown_request(rt: Runtime) -> None:
    ref = rt.spawn(Agent("p", model=ScriptedModel(["hi"])))
    with pytest.raises(UnknownRequestError, match="no open requests"):
        ref.resume({"x": Answer()})
    ref.run("?")
    with pytest.raises(UnknownRequestError):
        ref.resume({"x": Answer()})


def test_a_new_run_while_suspended_is_refused(rt: Runtime) -> None:
    ref = rt.spawn(Agent("p", model=ScriptedModel([call("ask", question="q")]), tools=[ask]))
    ref.run("?")
    with pytest.raises(UserError, match="suspended"):
        ref.run("another")


def test_custom_request_kinds_and_declines(rt: Runtime) -> None:
    @tool
    def login(ctx: RunContext) -> Any:  # type: ignore[type-arg]
        """Needs the user to sign in."""
        if ctx.answer is None:
            return Pending(
                Request(kind="authorization", prompt="Sign in", data={"url": "https://x"})
            )
        return "signed in" if ctx.answer.ok else f"not signed in: {ctx.answer.reason}"

    model = ScriptedModel([call("login"), "ok"])
    ref = rt.spawn(Agent("p", model=model, tools=[login]))
    (request,) = ref.run("?").requests
    assert request.kind == "authorization"
    result = ref.resume({request.id: Answer(ok=False, reason="user refused")})
    assert tool_results(result.messages)[0].content == "not signed in: user refused"
