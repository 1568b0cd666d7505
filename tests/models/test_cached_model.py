"""CachedModel: record a model's replies in SQLite, replay them offline, typed misses."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from actors import Agent, ModelRequest, Runtime, UserMessage
from actors.exceptions import CacheMissError, UserError
from actors.models import CachedModel
from actors.sim import Simulation
from actors.testing import FunctionModel, ScriptedModel, call


def counting_model() -> tuple[FunctionModel, list[int]]:
    asked: list[int] = []

    def reply(messages: list[object], tools: list[object]) -> str:
        asked.append(1)
        return f"answer {len(asked)}"

    return FunctionModel(reply), asked


def test_a_recorded_run_replays_identically_without_the_model(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    inner, asked = counting_model()
    agent = Agent("a", model=CachedModel(inner, path))
    with Runtime() as runtime:
        first = runtime.spawn(agent).run("hello")
    assert asked == [1]
    replay = CachedModel(None, path, mode="replay", name="function")
    with Runtime() as runtime:
        again = runtime.spawn(Agent("a", model=replay)).run("hello")
    assert again.output == first.output == "answer 1"
    assert asked == [1]  # the inner model was not asked again
    assert (replay.hits, replay.misses, len(replay)) == (1, 0, 1)


def test_a_miss_in_replay_mode_is_a_typed_error(tmp_path: Path) -> None:
    replay = CachedModel(None, tmp_path / "empty.db", mode="replay")
    with Runtime() as runtime, pytest.raises(Exception, match="has no reply") as info:
        runtime.spawn(Agent("a", model=replay)).run("never recorded")
    assert isinstance(info.value.__cause__, CacheMissError)
    request = ModelRequest(messages=(UserMessage(content="x"),))
    with pytest.raises(CacheMissError, match="record it first"):
        asyncio.run(replay.request(request))


def test_record_mode_asks_every_time_and_auto_reuses(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    inner, asked = counting_model()
    request = ModelRequest(messages=(UserMessage(content="x"),))
    recorder = CachedModel(inner, path, mode="record")
    asyncio.run(recorder.request(request))
    asyncio.run(recorder.request(request))
    assert len(asked) == 2
    auto = CachedModel(inner, path)
    assert asyncio.run(auto.request(request)).message.content == "answer 2"
    assert len(asked) == 2


def test_a_simulation_replays_on_virtual_time(tmp_path: Path) -> None:
    path = tmp_path / "sim.db"
    script = ScriptedModel([call("noop"), "done"])

    def noop() -> str:
        """Nothing."""
        return "ok"

    def run(model: CachedModel) -> list[str]:
        sim = Simulation(seed=2)
        ref = sim.spawn(Agent("a", model=model, tools=[noop]))
        ref.run("go")
        assert sim.now == 2 * 1.5
        return [e.type for _, e in sim.events]

    recorded = run(CachedModel(script, path, latency=1.5))
    replayed = run(CachedModel(None, path, mode="replay", latency=1.5, name="scripted"))
    assert recorded == replayed


@pytest.mark.parametrize(
    ("inner", "mode"), [(None, "auto"), (None, "record"), (ScriptedModel([]), "sometimes")]
)
def test_bad_arguments_are_user_errors(tmp_path: Path, inner: object, mode: str) -> None:
    with pytest.raises(UserError):
        CachedModel(inner, tmp_path / "x.db", mode=mode)  # type: ignore[arg-type]
