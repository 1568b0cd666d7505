"""An in-process approval handler decides approvals instead of surfacing them to the host."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from actors import Agent, Answer, Request, Runtime, tool
from actors.testing import ScriptedModel, SyncDriver, call

RAN: list[str] = []
LOCK = threading.Lock()


@tool(requires_approval=True)
def delete(path: str) -> str:
    """Delete a file.

    Args:
        path: The file.
    """
    with LOCK:
        RAN.append(path)
    return f"deleted {path}"


@pytest.fixture(autouse=True)
def _clean() -> None:
    RAN.clear()


def _agent(*paths: str) -> Agent[Any]:
    return Agent(
        "janitor",
        model=ScriptedModel([[call("delete", path=p) for p in paths], "done"]),
        tools=[delete],
    )


def _tool_results(messages: Any) -> list[str]:
    return [m.content for m in messages if m.role == "tool"]


def test_handler_approves_and_denies_per_call_and_the_run_completes() -> None:
    asked: list[Request] = []

    def handler(request: Request) -> bool:
        asked.append(request)
        return bool(request.data["arguments"]["path"].startswith("/tmp/"))

    with Runtime() as runtime:
        result = runtime.spawn(_agent("/tmp/a", "/etc/b"), approval_handler=handler).run(
            "clean up", timeout=10
        )
    assert result.completed
    assert RAN == ["/tmp/a"]
    assert _tool_results(result.messages) == [
        "deleted /tmp/a",
        "Tool call was rejected: no reason given",
    ]
    assert [r.kind for r in asked] == ["approval", "approval"]
    assert {r.data["tool"] for r in asked} == {"delete"}
    assert not result.requests


def test_handler_answer_can_edit_arguments_and_give_a_reason() -> None:
    def handler(request: Request) -> Answer:
        if request.data["arguments"]["path"] == "/a":
            return Answer(ok=True, arguments={"path": "/a.bak"})
        return Answer(ok=False, reason="not that one")

    with Runtime() as runtime:
        result = runtime.spawn(_agent("/a", "/b"), approval_handler=handler).run("go", timeout=10)
    assert RAN == ["/a.bak"]
    assert _tool_results(result.messages) == [
        "deleted /a.bak",
        "Tool call was rejected: not that one",
    ]


@pytest.mark.parametrize("decision", [RuntimeError("boom"), "yes"])
def test_a_failing_or_confused_handler_denies(decision: object) -> None:
    def handler(request: Request) -> Any:
        if isinstance(decision, Exception):
            raise decision
        return decision

    with Runtime() as runtime:
        result = runtime.spawn(_agent("/a"), approval_handler=handler).run("go", timeout=10)
    assert RAN == []
    (content,) = _tool_results(result.messages)
    assert content.startswith("Tool call was rejected: the approval handler")


def test_without_a_handler_the_tool_never_runs_and_the_request_surfaces() -> None:
    with Runtime() as runtime:
        result = runtime.spawn(_agent("/a")).run("go", timeout=10)
    assert result.suspended
    assert RAN == []
    assert result.requests[0].kind == "approval"


def test_children_inherit_the_handler() -> None:
    child = Agent(
        "child", model=ScriptedModel([call("delete", path="/c"), "child done"]), tools=[delete]
    )
    lead = Agent(
        "lead", model=ScriptedModel([call("child", task="clean"), "lead done"]), subagents=[child]
    )
    with Runtime() as runtime:
        result = runtime.spawn(lead, approval_handler=lambda request: True).run("go", timeout=10)
    assert result.output == "lead done"
    assert RAN == ["/c"]


def test_the_sync_driver_uses_the_handler_too() -> None:
    result = SyncDriver(_agent("/a"), approval_handler=lambda request: True).run("go")
    assert result.completed
    assert RAN == ["/a"]


def test_a_handler_silent_past_the_tool_timeout_denies() -> None:
    release = threading.Event()

    @tool(requires_approval=True, timeout=0.2)
    def wipe(path: str) -> str:
        """Wipe a disk.

        Args:
            path: The disk.
        """
        with LOCK:
            RAN.append(path)
        return "wiped"

    def slow_handler(request: Request) -> bool:
        release.wait(10)  # a person who never answers
        return True

    agent = Agent("ops", model=ScriptedModel([call("wipe", path="/dev/sda"), "ok"]), tools=[wipe])
    try:
        with Runtime() as runtime:
            result = runtime.spawn(agent, approval_handler=slow_handler).run("go", timeout=10)
    finally:
        release.set()
    assert RAN == []
    (content,) = _tool_results(result.messages)
    assert "did not answer within 0.2 s" in content
