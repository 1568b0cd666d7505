"""Wrong arguments found by trying the API as a careless user: a typed error at the call.

Each of these raised a bare TypeError or AttributeError from deep inside (or, for a model that
is not one, failed only when the agent ran).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from actors import Agent, ContextUpdate, Runtime
from actors.exceptions import AgentDefinitionError, InvalidUpdateError, UserError
from actors.sim import Simulation, sweep
from actors.store import MemoryStore, SQLiteStore
from actors.testing import ScriptedModel


def world(sim: Simulation, agents: int = 1) -> None:
    """A world with nothing in it."""


@pytest.fixture
def runtime() -> Iterator[Runtime]:
    with Runtime() as rt:
        yield rt


def spec() -> Agent[Any]:
    return Agent("a", model=ScriptedModel(["ok"] * 3))


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: Agent("a", model=ScriptedModel([]), tools=5), "tools must be a list"),  # type: ignore[arg-type]
        (lambda: Agent("a", model=ScriptedModel([]), tool_timeout="x"), "tool_timeout"),  # type: ignore[arg-type]
        (lambda: Agent("a", model=ScriptedModel([]), model_timeout=math.nan), "model_timeout"),
        (lambda: Agent("a", model=5), "model must be a Model"),  # type: ignore[arg-type]
    ],
)
def test_an_agent_spec_refuses_what_it_cannot_use(build: Callable[[], Any], match: str) -> None:
    with pytest.raises(AgentDefinitionError, match=match):
        build()


@pytest.mark.parametrize("timeout", ["x", math.nan, -1, 0, True])
def test_a_run_refuses_a_timeout_that_is_not_seconds(runtime: Runtime, timeout: Any) -> None:
    ref = runtime.spawn(spec())
    with pytest.raises(UserError, match="timeout"):
        ref.run("hi", timeout=timeout)
    assert ref.run("hi").output == "ok"  # nothing was started by the refused call


def test_resume_takes_a_mapping_of_answers(runtime: Runtime) -> None:
    ref = runtime.spawn(spec())
    with pytest.raises(UserError, match="mapping of request id"):
        ref.resume(5)  # type: ignore[arg-type]


def test_spawn_and_restore_name_a_wrong_store_or_session(runtime: Runtime) -> None:
    with pytest.raises(UserError, match="store must be a SessionStore"):
        runtime.spawn(spec(), store="x")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="session_id must be a non-empty string"):
        runtime.spawn(spec(), store=MemoryStore(), session_id="")
    with pytest.raises(UserError, match="agent specs"):
        runtime.restore("s", store=MemoryStore(), agents=5)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="file path"):
        SQLiteStore(5)  # type: ignore[arg-type]


def test_a_context_update_is_built_from_operations() -> None:
    with pytest.raises(InvalidUpdateError, match="tuple of operations"):
        ContextUpdate(5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: sweep(5, seeds=[1]), "world function"),  # type: ignore[arg-type]
        (lambda: sweep(world, seeds=5), "seeds must be a list"),  # type: ignore[arg-type]
        (lambda: sweep(world, seeds=[1], params=5), "params must map"),  # type: ignore[arg-type]
        (lambda: sweep(world, seeds=[1], params={"bogus": [1]}), "cannot take"),
        (lambda: Simulation(seed=1).at(math.inf, lambda: None), "finite"),
    ],
)
def test_a_simulation_names_what_is_wrong(call: Callable[[], Any], match: str) -> None:
    with pytest.raises(UserError, match=match):
        call()


def test_an_explicit_agent_id_that_is_taken_is_refused(runtime: Runtime) -> None:
    first = runtime.spawn(spec(), agent_id="alice")
    with pytest.raises(UserError, match="'alice' is taken"):
        runtime.spawn(spec(), agent_id="alice")
    assert runtime.ref("alice").run("hi").output == "ok"  # still the first one
    assert first.agent_id == "alice"
    assert runtime.spawn(spec()).agent_id == "a"  # names still made unique by default
    assert runtime.spawn(spec()).agent_id == "a-2"
