"""The state machine driven with no threads gives the same log as the actor."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from structlog.testing import capture_logs

from actors import (
    Agent,
    Answer,
    ContextUpdate,
    Pending,
    Request,
    RunContext,
    Runtime,
    ToolResultMessage,
    UserMessage,
    tool,
)
from actors.exceptions import MaxIterationsExceeded
from actors.testing import FakeClock, ScriptedModel, SyncDriver, call

from .helpers import plain


@tool
def remember(ctx: RunContext, fact: str) -> tuple[str, ContextUpdate]:  # type: ignore[type-arg]
    """Remember a fact."""
    return f"noted {fact}", ContextUpdate().append("facts", fact).log_event(
        "app.noted", {"f": fact}
    )


@tool
def explode() -> str:
    """Fails."""
    raise RuntimeError("boom")


@tool
async def shout(text: str) -> str:
    """Async."""
    return text.upper()


def _script() -> list[Any]:
    return [
        [call("remember", fact="a"), call("explode"), call("shout", text="hi")],
        call("remember", fact=7),  # invalid: goes back to the model
        call("nope"),  # unknown tool
        [call("remember", fact="b"), call("shout", text="x")],
        "all done",
    ]


def _agent(script: list[Any]) -> Agent:
    return Agent(
        "twin",
        model=ScriptedModel(script),
        instructions="Be brief.",
        tools=[remember, explode, shout],
        tool_retries=3,
    )


def test_sync_driver_and_actor_produce_the_same_event_log() -> None:
    script = _script()  # the same ToolCall objects (ids) for both
    driver = SyncDriver(_agent(script), metadata={"user": "ada"}, clock=FakeClock())
    driven = driver.run("start")
    with Runtime(clock=FakeClock()) as rt, capture_logs():
        ref = rt.spawn(_agent(script), metadata={"user": "ada"})
        acted = ref.run("start")
        actor_events = ref.context().events
    assert plain(driver.context.events) == plain(actor_events)
    assert driven.output == acted.output == "all done"
    assert driven.metadata == acted.metadata
    assert driven.usage == acted.usage
    assert [e.created_at for e in driver.context.events] == [e.created_at for e in actor_events]


def test_sync_driver_runs_on_the_calling_thread() -> None:
    threads: set[int] = set()

    @tool
    def where() -> str:
        """Record the thread."""
        threads.add(threading.get_ident())
        return "here"

    SyncDriver(Agent("t", model=ScriptedModel([call("where"), "ok"]), tools=[where])).run("?")
    assert threads == {threading.get_ident()}


def test_sync_driver_raises_run_errors_and_stays_usable() -> None:
    model = ScriptedModel([call("shout", text="a"), "fine"])
    driver = SyncDriver(Agent("t", model=model, tools=[shout], max_iterations=1))
    with pytest.raises(MaxIterationsExceeded):
        driver.run("one")
    assert driver.run("two").output == "fine"


def test_sync_driver_suspends_and_resumes() -> None:
    @tool
    def ask(ctx: RunContext) -> Any:  # type: ignore[type-arg]
        """Ask the host."""
        if ctx.answer is None:
            return Pending(Request(kind="input", prompt="Name?"))
        return f"hello {ctx.answer.data}"

    driver = SyncDriver(Agent("t", model=ScriptedModel([call("ask"), "done"]), tools=[ask]))
    suspended = driver.run("?")
    assert suspended.status == "suspended"
    (request,) = suspended.requests
    result = driver.resume({request.id: Answer(data="Ada")})
    assert result.output == "done"
    assert result.messages[-2].content == "hello Ada"


def test_sync_driver_steering_and_cancel_of_an_idle_agent() -> None:
    driver = SyncDriver(Agent("t", model=ScriptedModel(["ok"])))
    driver.cancel()  # idle: nothing happens
    driver.send("context first")
    result = driver.run("then the prompt")
    assert [m.content for m in result.messages] == ["context first", "then the prompt", "ok"]


def test_a_runs_messages_copy_with_updates_like_any_message() -> None:
    # The loop builds prompts, tool results and peer messages without validating them again:
    # they must behave as messages built by hand (equal, dumped, copied with updates).
    agent = Agent("a", model=ScriptedModel([call("shout", text="x"), "done"]), tools=[shout])
    result = SyncDriver(agent).run("go")
    prompt, reply, answer = result.messages[0], result.messages[1], result.messages[2]
    assert prompt == UserMessage(content="go")
    assert answer == ToolResultMessage(
        tool_call_id=reply.tool_calls[0].id,
        tool_name="shout",
        content="X",  # type: ignore[union-attr]
    )
    assert prompt.model_copy(update={"content": "again"}) == UserMessage(content="again")
    assert answer.model_copy(update={"is_error": True}).is_error
    assert prompt.model_dump(exclude_unset=True) == {"content": "go"}
