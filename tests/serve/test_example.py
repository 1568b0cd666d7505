"""examples/serve: the agent module serves, and the deployment files name a valid command."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

pytest.importorskip("starlette")

import yaml
from starlette.testclient import TestClient

from actors.cli._app import build_parser
from actors.cli._target import load_agent
from actors.serve import create_app
from actors.store import MemoryStore

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "serve"


def test_the_example_agent_serves_offline_with_an_approval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACTORS_DEFAULT_MODEL", "test")
    agent = load_agent(f"{EXAMPLE / 'agent.py'}:assistant")
    with TestClient(create_app(agent, MemoryStore())) as client:
        client.post("/sessions", json={"session_id": "demo"})
        parked = client.post("/sessions/demo/runs", json={"prompt": "refund A-1"}).json()
        assert parked["result"]["status"] == "suspended"
        (request,) = parked["result"]["requests"]
        assert request["data"]["tool"] == "refund"
        done = client.post("/sessions/demo/answers", json={"answers": {request["id"]: True}})
        assert done.json()["result"]["status"] == "completed"


def test_the_deployment_files_run_a_command_the_cli_accepts() -> None:
    procfile = (EXAMPLE / "Procfile").read_text().splitlines()
    (web,) = [line for line in procfile if line.startswith("web:")]
    commands = [web.removeprefix("web:")]
    compose = yaml.safe_load((EXAMPLE / "compose.yaml").read_text())
    shell = compose["x-app"]["command"]
    commands.append(shell.split("&&", 1)[1].strip().rstrip('"'))
    assert set(compose["services"]) == {"db", "app1", "app2", "proxy"}
    for command in commands:
        words = shlex.split(command.replace("$PORT", "8000").replace("$DATABASE_URL", "pg://x"))
        assert words[:2] == ["actors", "serve"]
        args = build_parser().parse_args(words[1:])
        assert args.target == "agent:assistant"
        assert args.host == "0.0.0.0"
