"""No model is an error: Agent.model, then the host's default, then ACTORS_DEFAULT_MODEL."""

from __future__ import annotations

from typing import Any

import pykka
import pytest

from actors import Agent, RunContext, Runtime, Subagent, tool
from actors.exceptions import UserError
from actors.loop._default_model import DEFAULT_MODEL_ENV, resolve_model
from actors.models import OpenAIChatModel
from actors.store import MemoryStore
from actors.testing import ScriptedModel, SyncDriver, TestModel, call

from .helpers import tool_results


@pytest.fixture(autouse=True)
def _no_default_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DEFAULT_MODEL_ENV, raising=False)


def test_spawning_an_agent_without_a_model_says_how_to_give_one() -> None:
    with Runtime() as rt:
        with pytest.raises(UserError) as info:
            rt.spawn(Agent("assistant"))
        message = str(info.value)
        assert "agent 'assistant' has no model" in message
        assert "Agent(model=...)" in message
        assert "Runtime(default_model=...)" in message
        assert DEFAULT_MODEL_ENV in message
        assert rt.live_agents() == 0  # nothing was started
        assert pykka.ActorRegistry.get_all() == []
        # The refused spawn kept nothing: the same name spawns once a model is given.
        ref = rt.spawn(Agent("assistant", model=ScriptedModel(["hi"])))
        assert ref.agent_id == "assistant"


def test_a_subagent_without_a_model_is_refused_at_spawn_naming_it() -> None:
    lead = Agent("lead", model=ScriptedModel([]), subagents=[Subagent(Agent("helper"))])
    with Runtime() as rt, pytest.raises(UserError, match="agent 'helper' has no model"):
        rt.spawn(lead)


def test_the_runtime_default_serves_every_agent_without_a_model() -> None:
    default = ScriptedModel([call("helper", task="go"), "helped", "lead done"], per_agent=False)
    lead = Agent("lead", subagents=[Agent("helper")])
    with Runtime(default_model=default) as rt:
        result = rt.spawn(lead).run("?")
    assert result.output == "lead done"
    assert tool_results(result.messages)[0].content == "helped"


def test_the_agent_model_wins_over_the_default() -> None:
    own = ScriptedModel(["mine"])
    with Runtime(default_model=ScriptedModel(["default"])) as rt:
        assert rt.spawn(Agent("a", model=own)).run("?").output == "mine"


def test_a_default_model_string_is_resolved_when_the_runtime_is_made() -> None:
    with Runtime(default_model="test") as rt:
        assert isinstance(rt.default_model, TestModel)
        assert rt.spawn(Agent("a")).run("?").status == "completed"
    with Runtime(default_model="openai-compatible:m@http://127.0.0.1:9/v1") as rt:
        assert isinstance(rt.default_model, OpenAIChatModel)
    with pytest.raises(UserError, match="cannot tell the provider"):
        Runtime(default_model="gpt-4o")
    with pytest.raises(UserError, match="default_model must be a Model or a model string"):
        Runtime(default_model=42)  # type: ignore[arg-type]


def test_the_environment_variable_is_the_last_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DEFAULT_MODEL_ENV, "test")
    with Runtime() as rt:
        first = rt.resolve_model(Agent("a"))
        assert isinstance(first, TestModel)
        assert rt.resolve_model(Agent("b")) is first  # one model (one HTTP client) per string
        assert rt.spawn(Agent("a")).run("?").status == "completed"
    with Runtime(default_model=ScriptedModel(["x"])) as rt:  # the runtime's default comes first
        assert not isinstance(rt.resolve_model(Agent("a")), TestModel)


def test_a_bad_environment_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DEFAULT_MODEL_ENV, "gpt-4o")
    with pytest.raises(UserError, match=f"{DEFAULT_MODEL_ENV}='gpt-4o' is not a model"):
        resolve_model(Agent("a"))


def test_the_sync_driver_follows_the_same_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UserError, match="agent 'a' has no model"):
        SyncDriver(Agent("a"))
    assert SyncDriver(Agent("a"), default_model=ScriptedModel(["hi"])).run("?").output == "hi"
    lead = Agent("lead", subagents=[Agent("helper")])
    default = ScriptedModel([call("helper", task="go"), "helped", "done"])
    assert SyncDriver(lead, default_model=default).run("?").output == "done"
    monkeypatch.setenv(DEFAULT_MODEL_ENV, "test")
    assert SyncDriver(Agent("a")).run("?").status == "completed"


def test_a_delegated_child_without_a_model_fails_the_delegating_tool() -> None:
    @tool
    def hand_off(ctx: RunContext[Any]) -> str:
        """Delegate to a spec without a model."""
        return str(ctx.delegate(Agent("nobody"), "do it", timeout=10))

    model = ScriptedModel([call("hand_off"), "done"])
    with Runtime() as rt:
        result = rt.spawn(Agent("a", model=model, tools=[hand_off])).run("?")
    [failed] = tool_results(result.messages)
    assert failed.is_error
    assert "agent 'nobody' has no model" in failed.content


def test_restoring_needs_a_model_too_and_checks_before_starting_anything() -> None:
    store = MemoryStore()
    with Runtime(default_model=ScriptedModel(["one"])) as rt:
        rt.spawn(Agent("assistant"), store=store, session_id="s").run("?")
    with Runtime() as rt:
        with pytest.raises(UserError, match="agent 'assistant' has no model"):
            rt.restore("s", store=store, agents=[Agent("assistant")])
        assert rt.live_agents() == 0
    with Runtime(default_model=ScriptedModel(["one", "two"], per_agent=True)) as rt:
        ref = rt.restore("s", store=store, agents=[Agent("assistant")])
        assert ref.run("again").output == "two"
