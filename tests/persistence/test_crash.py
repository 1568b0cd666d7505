"""Crash recovery with real processes: SIGKILL a tree mid-run, restore it, finish the run."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from actors import AgentContext, Runtime
from actors.loop._recovery import OUTCOME_UNKNOWN
from actors.store import SQLiteStore

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from crash_tree import specs  # noqa: E402

KILL_POINTS = int(os.environ.get("ACTORS_CRASH_POINTS", "20"))


def _run_until(db: Path, effects: Path, session_id: str, kill_after: int) -> list[list[Any]]:
    """Run the worker, SIGKILL it after ``kill_after`` event lines; return what it was told."""
    env = {**os.environ, "CRASH_SIDE_EFFECTS": str(effects)}
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "crash_tree.py"), str(db), session_id],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    told: list[list[Any]] = []
    seen = 0
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            if line.startswith("TOLD "):
                told.extend(json.loads(line[5:]))
            elif line.startswith("EV "):
                seen += 1
                if seen >= kill_after:
                    proc.send_signal(signal.SIGKILL)
                    break
    finally:
        proc.stdout.close()
        proc.wait(timeout=30)
    return told


@pytest.mark.parametrize("seed", range(KILL_POINTS))
def test_sigkill_then_restore_loses_nothing_and_hides_no_side_effect(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, effects = tmp_path / "s.sqlite", tmp_path / "effects.txt"
    effects.touch()
    monkeypatch.setenv("CRASH_SIDE_EFFECTS", str(effects))
    kill_after = random.Random(seed).randint(1, 60)
    told = _run_until(db, effects, "crash", kill_after)

    with SQLiteStore(db) as store:
        if not any(s.session_id == "crash" for s in store.list_sessions()):
            pytest.skip("killed before the session was created")  # pragma: no cover
        with Runtime() as runtime:
            ref = runtime.restore("crash", store=store, agents=[specs()])
            result = ref.run("after the crash", timeout=30)
            assert result.status == "completed"
        stored = store.load("crash")

    contexts = {a.record.agent_id: AgentContext.deserialize(a.context) for a in stored.agents}
    # Nothing the host was told about is missing.
    for agent_id, seq, event_type in told:
        assert contexts[agent_id].events[seq].type == event_type
    for agent in stored.agents:
        seqs = [e["seq"] for e in agent.context["events"]]
        assert seqs == list(range(len(seqs))), f"{agent.record.agent_id}: seq not contiguous"
    # Every side effect is either in its agent's log or declared possibly-run.
    for line in effects.read_text().splitlines():
        agent_id, call_id, _item = line.split(" ", 2)
        results = {
            m.tool_call_id: m.content for m in contexts[agent_id].messages if m.role == "tool"
        }
        assert call_id in results, f"side effect of {call_id} is not in {agent_id}'s log"
        assert results[call_id].startswith("recorded") or results[call_id] == OUTCOME_UNKNOWN
    # Restoring again adds nothing.
    with SQLiteStore(db) as store:
        before = {a.record.agent_id: len(a.context["events"]) for a in store.load("crash").agents}
        with Runtime() as runtime:
            runtime.restore("crash", store=store, agents=[specs()])
        after = {a.record.agent_id: len(a.context["events"]) for a in store.load("crash").agents}
    assert after == before
