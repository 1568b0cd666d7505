"""Same world, same seed, same bytes: in separate processes with different hash seeds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

WORLD = Path(__file__).with_name("world_full.py")
ROOT = Path(__file__).resolve().parents[2]


def export(seed: int, hash_seed: str) -> bytes:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(WORLD), str(seed)],
        capture_output=True,
        env=env,
        timeout=50,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return done.stdout


@pytest.mark.timeout(120)
def test_the_same_world_and_seed_give_byte_identical_logs_in_two_processes() -> None:
    first = export(7, "1")
    second = export(7, "2")
    assert first == second
    other = export(8, "1")
    assert other != first

    types = {json.loads(line)["type"] for line in first.splitlines()}
    # everything the determinism promise covers was in play
    for kind in (
        "message_sent",
        "message_received",
        "subagent_spawned",
        "suspended",
        "resumed",
        "cancelled",  # the subagent deadline
    ):
        assert kind in types, kind
    lines = [json.loads(line) for line in first.splitlines()]
    results = [e["data"]["content"] for e in lines if e["type"] == "tool_result"]
    assert any(text.startswith("Tool timed out after") for text in results)
    assert any("no agent 'nobody'" in text for text in results)
    parallel = [
        e for e in lines if e["type"] == "assistant_message" and len(e["data"]["tool_calls"]) > 1
    ]
    assert parallel
