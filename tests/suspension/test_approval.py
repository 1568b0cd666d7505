"""Approval: a tool marked ``requires_approval`` never runs without the host's yes."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from actors import Agent, Answer, RunContext, Runtime, tool
from actors.testing import ScriptedModel, call

from .helpers import events_of, tool_results

RAN: list[tuple[str, int, Any]] = []
LOCK = threading.Lock()


@tool(requires_approval=True)
def transfer(ctx: RunContext, to: str, amount: int) -> str:  # type: ignore[type-arg]
    """Move money.

    Args:
        to: The account.
        amount: How much.
    """
    with LOCK:
        RAN.append((to, amount, ctx.answer))
    return f"sent {amount} to {to}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


def _agent(**arguments: Any) -> Agent:
    return Agent(
        "bank",
        model=ScriptedModel([call("transfer", **arguments), "done"]),
        tools=[transfer],
    )


def test_approval_request_surfaces_with_tool_and_arguments(rt: Runtime) -> None:
    ref = rt.spawn(_agent(to="bob", amount=10))
    suspended = ref.run("pay bob")
    assert suspended.status == "suspended"
    (request,) = suspended.requests
    assert request.kind == "approval"
    assert request.data == {"tool": "transfer", "arguments": {"to": "bob", "amount": 10}}
    assert "transfer" in request.prompt
    assert request.agent_id == "bank"
    assert RAN == []
    (event,) = events_of(suspended.events, "suspended")
    assert event["approval"] is True
    # The call never started: no tool_call event until it is approved.
    assert events_of(suspended.events, "tool_call") == []


def test_approve_runs_the_tool_with_its_arguments(rt: Runtime) -> None:
    ref = rt.spawn(_agent(to="bob", amount=10))
    (request,) = ref.run("?").requests
    result = ref.resume({request.id: Answer(ok=True)})
    assert result.output == "done"
    assert [("bob", 10, Answer(ok=True))] == RAN
    assert tool_results(result.messages)[0].content == "sent 10 to bob"


def test_approve_with_edited_arguments_runs_those_and_logs_them(rt: Runtime) -> None:
    ref = rt.spawn(_agent(to="bob", amount=10_000))
    (request,) = ref.run("?").requests
    answer = Answer(ok=True, arguments={"to": "bob", "amount": "100"})
    result = ref.resume({request.id: answer})
    assert [(to, amount) for to, amount, _ in RAN] == [("bob", 100)]
    assert tool_results(result.messages)[0].content == "sent 100 to bob"
    (logged,) = events_of(result.events, "tool_call")
    assert logged["arguments"] == {"to": "bob", "amount": "100"}


def test_edited_arguments_are_validated_again(rt: Runtime) -> None:
    ref = rt.spawn(_agent(to="bob", amount=10))
    (request,) = ref.run("?").requests
    result = ref.resume({request.id: Answer(ok=True, arguments={"to": "bob", "amount": "lots"})})
    error = tool_results(result.messages)[0]
    assert error.is_error
    assert error.content.startswith("Approved arguments are invalid: amount:")
    assert RAN == []
    assert result.output == "done"


def test_reject_gives_the_model_the_reason(rt: Runtime) -> None:
    ref = rt.spawn(_agent(to="mallory", amount=10))
    (request,) = ref.run("?").requests
    result = ref.resume({request.id: Answer(ok=False, reason="unknown payee")})
    error = tool_results(result.messages)[0]
    assert (error.content, error.is_error) == ("Tool call was rejected: unknown payee", True)
    assert RAN == []
    assert events_of(result.events, "resumed") == [{"request_id": request.id, "ok": False}]


def test_reject_without_a_reason(rt: Runtime) -> None:
    ref = rt.spawn(_agent(to="x", amount=1))
    (request,) = ref.run("?").requests
    result = ref.resume({request.id: Answer(ok=False)})
    assert tool_results(result.messages)[0].content == "Tool call was rejected: no reason given"


def test_deny_by_default_unanswered_then_cancelled_never_runs(rt: Runtime) -> None:
    ref = rt.spawn(_agent(to="bob", amount=10))
    (request,) = ref.run("?").requests
    ref.cancel("nobody answered")
    context = ref.context()
    assert context.suspended == {}
    (result,) = tool_results(context.messages)
    assert result.is_error
    assert "not executed" in result.content
    assert RAN == []
    closed = events_of(context.events, "resumed")
    assert closed == [
        {"request_id": request.id, "ok": False, "closed": "the run was cancelled (nobody answered)"}
    ]


def test_invalid_arguments_are_refused_before_asking(rt: Runtime) -> None:
    model = ScriptedModel([call("transfer", to="bob", amount="x"), "done"])
    result = rt.spawn(Agent("bank", model=model, tools=[transfer])).run("?")
    assert result.status == "completed"
    assert tool_results(result.messages)[0].is_error
    assert RAN == []


def test_approval_deep_in_the_tree_surfaces_at_the_root(rt: Runtime) -> None:
    teller = Agent(
        "teller",
        model=ScriptedModel([call("transfer", to="bob", amount=5), "paid"]),
        tools=[transfer],
    )
    root = Agent(
        "root", model=ScriptedModel([call("teller", task="pay"), "ok"]), subagents=[teller]
    )
    ref = rt.spawn(root)
    (request,) = ref.run("?").requests
    assert request.kind == "approval"
    assert request.path == ("root", "root-sub-1")
    result = ref.resume({request.id: Answer()})
    assert result.output == "ok"
    assert [(to, amount) for to, amount, _ in RAN] == [("bob", 5)]
