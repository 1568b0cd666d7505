"""Idle agents of a `RayRuntime` sleep in the store and wake on their next message."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from actors import Agent
from actors.store import SQLiteStore
from actors.testing import ScriptedModel

BOUND = 60.0


def _chat() -> Agent[str]:
    return Agent("chat", model=ScriptedModel(["one", "two", "three"], per_agent=True))


def test_idle_sessions_sleep_on_their_hosts_and_wake_on_the_next_run(
    ray_cluster: Any, tmp_path: Path
) -> None:
    from actors.ray import RayRuntime

    with (
        SQLiteStore(tmp_path / "s.db") as store,
        RayRuntime(hosts=2, store=store, idle_after=0.05) as rt,
    ):
        slept = threading.Event()
        refs = [rt.open_session(_chat(), session_id=f"user-{i}") for i in range(4)]
        assert rt.live_agents() == 4
        last = refs[-1]
        last.subscribe(lambda event: slept.set() if event.type == "passivated" else None)
        for ref in refs:
            assert ref.run("hello", timeout=BOUND).output == "one"
        assert slept.wait(BOUND)
        # Asleep: in the store, not in memory; a run (or open_session) wakes it, state and all.
        assert last.status == "idle"
        again = rt.open_session(_chat(), session_id=last.session_id)
        result = again.run("again", timeout=BOUND)
        assert result.output == "two"
        assert [m.content for m in result.messages if m.role == "user"] == ["hello", "again"]
        types = [e["type"] for e in store.load(last.session_id).agents[0].context["events"]]
        assert types.index("passivated") < types.index("activated")
