"""Our A2AAgent against our own server in another process (``actors serve``)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("a2a")
pytest.importorskip("uvicorn")

from actors import Runtime, TextDelta
from actors.a2a import A2AAgent

from .test_agent import _boss

AGENTS = Path(__file__).resolve().parent.parent / "serve" / "agents.py"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_our_agent_calls_our_served_agent_in_another_process(tmp_path: Path) -> None:
    port = _free_port()
    env = {**os.environ, "ACTORS_HOME": str(tmp_path / "home"), "ACTORS_SERVE_TOKEN": "tk"}
    command = [sys.executable, "-m", "actors.cli", "serve", f"{AGENTS}:assistant"]
    process = subprocess.Popen(
        [*command, "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        banner = process.stderr.readline()  # printed before uvicorn starts
        assert "A2A at /a2a" in banner
        for line in process.stderr:  # uvicorn says when it listens
            if "Uvicorn running on" in line:
                break
        remote = A2AAgent(f"http://127.0.0.1:{port}", name="assistant", token="tk", timeout=30)
        with Runtime() as runtime:
            events = list(runtime.spawn(_boss(remote)).run_stream("team"))
            asked = runtime.spawn(_boss(remote)).run("approve")
    finally:
        process.terminate()
        process.wait(30)
        if process.stderr is not None:
            process.stderr.close()
    # The remote's whole answer, its root's text streamed as our child's deltas.
    deltas = [e for e in events if isinstance(e, TextDelta) and len(e.path) == 2]
    assert "".join(e.text for e in deltas) == "Finished: Hello, look it up!"
    # An approval over there is a question to the caller here, never a silent yes.
    assert "needs input" in asked.output
    assert "delete_file" in asked.output
