"""Every example runs offline, as a user runs it, and prints what it promises."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run_example(name: str, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        capture_output=True,
        text=True,
        timeout=50,
        cwd=EXAMPLES.parent,
        env={**os.environ, "ACTORS_ALLOW_MODEL_REQUESTS": "0"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc.stdout


def test_every_example_is_tested() -> None:
    tested = {"single_agent.py", "research_team.py", "long_lived_assistant.py",
              "human_approval.py", "simulation.py", "mcp_tools.py",
              "social.py"}  # fmt: skip
    assert {p.name for p in EXAMPLES.glob("*.py")} == tested


def test_single_agent() -> None:
    out = run_example("single_agent.py")
    assert "answer: 120 USD is 110.40 EUR at a rate of 0.92." in out
    assert "  assistant: convert({'amount': 120.0, 'rate': 0.92})\n  tool: 110.4\n" in out
    assert "usage: requests=2 " in out


def test_research_team() -> None:
    out = run_example("research_team.py")
    for n in (1, 2, 3):
        assert f"    lead-sub-{n} (researcher): finished" in out
        assert f"  lead-sub-{n}: 2 requests, notes=['actors: an actor owns" in out
    assert "lead metadata after the run: {'project': 'agents'}" in out
    assert "tree usage: requests=8 " in out


def test_long_lived_assistant() -> None:
    out = run_example("long_lived_assistant.py")
    assert out.index("worker: Nice to meet you, Ada.") < out.index("worker killed")
    assert re.search(r"worker killed \(exit code -?\d+\)", out)
    assert "restored 'assistant-1': 7 messages, metadata {'name': 'Ada'}" in out
    assert "the interrupted call: Tool call was interrupted" in out
    assert out.endswith("assistant: Your name is Ada.\n")


def test_human_approval() -> None:
    out = run_example("human_approval.py").splitlines()
    assert out[0].startswith("1. suspended: input request ")
    assert out[1] == (
        "2. suspended: approval request: {'tool': 'transfer', 'arguments': "
        "{'amount': 500, 'to': 'Bob'}}"
    )
    assert out[2] == "3. completed: Done: sent 200 EUR to Bob"
    assert out[3].startswith("4. completed: Done: ")
    assert "Mallory is not your landlord" in out[3]


def test_simulation() -> None:
    out = run_example("simulation.py")
    rounds = re.findall(r"round +(\d+): +(\d+)/50 agents know", out)
    known = [int(k) for _, k in rounds]
    assert known == sorted(known)  # gossip only spreads
    assert known[-1] == 50
    assert re.search(r"the largest secret is \d{4}; the longest transcript has \d+ messages", out)


def test_mcp_tools() -> None:
    out = run_example("mcp_tools.py")
    assert "answer: You need eggs, flour and milk." in out
    assert "  tool: eggs, flour, milk\n" in out
    assert "served tool: shopper(task)" in out
    assert out.endswith("over MCP: You need eggs, flour and milk.\n")


def test_social_network_simulation() -> None:
    # 10,000 users by default; a small town here (the same code, the same seed)
    out = run_example("social.py", "400", "1200").splitlines()
    assert out[0].startswith("400 users, 1200 virtual seconds, ")
    rows = [line for line in out if line.startswith("t=")]
    assert len(rows) == 5  # a sample every 300 virtual seconds, from 0
    last = dict(re.findall(r"(\w+)=\s*([\d.]+)", rows[-1]))
    assert int(last["posts"]) > 0
    assert int(last["likes"]) > 0
    assert int(last["messages"]) > 0
    assert run_example("social.py", "400", "1200").splitlines() == out  # seeded: same story
