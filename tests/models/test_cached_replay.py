"""A simulation recorded against a model server over HTTP replays offline, byte for byte."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Literal

import pytest

from actors import Agent, ContextUpdate, Model, RunContext
from actors.models import CachedModel, OpenAIChatModel
from actors.models._model import allow_model_requests
from actors.sim import Simulation
from bench.wire_server import serve, stats

PEERS = ("p0", "p1", "p2", "p3", "p4", "p5")


def tell(
    ctx: RunContext[None], to: Literal["p0", "p1", "p2", "p3", "p4", "p5"], text: str
) -> tuple[str, ContextUpdate]:
    """Tell another member of the group something."""
    sent = int(ctx.metadata.get("sent", 0))
    if sent >= 2 or to == ctx.agent_id:  # a bounded conversation
        return "not sent", ContextUpdate()
    return "sent", ContextUpdate().set("sent", sent + 1).send(to, text)


def run_world(model: Model) -> tuple[bytes, int]:
    """Six agents who message each other (what to say and to whom: the model's choice)."""
    sim = Simulation(seed=5, message_delay=1.0)
    spec = Agent("member", model=model, tools=[tell])
    for agent_id in PEERS:
        sim.spawn(spec, agent_id=agent_id)

    def start() -> None:
        for agent_id in PEERS[:3]:
            sim.ref(agent_id).run_async(f"You are {agent_id}. Say hello to someone.")

    sim.at(0.0, start)
    sim.run()
    out = io.StringIO()
    sim.export_jsonl(out)
    return out.getvalue().encode(), sim.steps


@pytest.mark.timeout(120)
def test_a_recorded_simulation_replays_to_the_same_bytes_offline(tmp_path: Path) -> None:
    path = tmp_path / "replies.db"
    with serve(latency=0.01) as url:
        provider = OpenAIChatModel("fake", base_url=url, api_key="k")
        recorder = CachedModel(provider, path)  # the simulation closes its clients at the end
        recorded, steps = run_world(recorder)
        asked = stats(url)["requests"]
    assert steps > 6
    assert recorded.count(b'"source":"peer"') >= 3
    assert asked == recorder.misses == len(recorder)  # each distinct request asked once
    # The server is gone and real requests are switched off: only the file answers.
    with allow_model_requests(False):
        offline = OpenAIChatModel("fake", base_url=url, api_key="k")
        replayed, _ = run_world(CachedModel(offline, path, mode="replay"))
        replay_only, _ = run_world(CachedModel(None, path, mode="replay", name=offline.name))
    assert replayed == recorded
    assert replay_only == recorded
