"""Peer messages on the pooled runtime and the inline driver, restore included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from actors import Agent, ContextUpdate, RunContext, Runtime, ToolCall
from actors.exceptions import AgentDefinitionError, UnknownAgentError
from actors.store import SQLiteStore
from actors.testing import ScriptedModel, SyncDriver, call

SCRIPT = Path(__file__).with_name("crash_peers.py")
ROOT = Path(__file__).resolve().parents[2]


def tell(ctx: RunContext[Any], to: str, text: str) -> tuple[str, ContextUpdate]:
    """Tell another agent.

    Args:
        to: Its id.
        text: The message.
    """
    return "sent", ContextUpdate().send(to, text).set("last_told", to)


def sender(*targets: str) -> Agent[Any]:
    return Agent(
        "sender",
        model=ScriptedModel([[call("tell", to=t, text=f"hi {t}") for t in targets], "done"]),
        tools=[tell],
    )


def turn_ended(ref: Any) -> threading.Event:
    ended = threading.Event()
    ref.subscribe(lambda e: ended.set() if e.type == "turn_end" else None)
    return ended


def test_a_peer_message_wakes_an_idle_receiver_on_the_runtime() -> None:
    with Runtime() as runtime:
        bob = runtime.spawn(Agent("bob", model=ScriptedModel(["got it"]), system_prompt="Be bob."))
        ended = turn_ended(bob)
        result = runtime.spawn(sender("bob")).run("go")
        assert ended.wait(10)
        sent = [e for e in result.events if e.type == "message_sent"]
        assert [(e.data["to"], e.data["message_id"]) for e in sent] == [("bob", "sender:1")]
        # the send is logged with the step, after the tool's result is applied
        types = [e.type for e in result.events]
        assert types.index("message_sent") < types.index("tool_result")
        ctx = bob.context()
        kinds = [e.type for e in ctx.events]
        assert kinds[:4] == ["message_received", "system_message", "user_message", "turn_start"]
        received = ctx.events[0].data
        assert (received["from"], received["content"]) == ("sender", "hi bob")
        assert ctx.events[2].data["source"] == "peer"
        assert [m.content for m in ctx.messages] == [
            "Be bob.",
            "[message from sender]\nhi bob",
            "got it",
        ]


def test_a_queue_receiver_keeps_the_message_for_its_next_run() -> None:
    with Runtime() as runtime:
        bob = runtime.spawn(Agent("bob", model=ScriptedModel(["ok"]), on_message="queue"))
        runtime.spawn(sender("bob")).run("go")
        result = bob.run("anything new?")
        assert [m.content for m in result.messages] == [
            "[message from sender]\nhi bob",
            "anything new?",
            "ok",
        ]
        assert sum(e.type == "turn_start" for e in bob.context().events) == 1


def test_an_unknown_receiver_is_an_error_result_and_nothing_is_sent() -> None:
    with Runtime() as runtime:
        result = runtime.spawn(sender("nobody")).run("go")
    error = result.messages[-2]
    assert error.is_error  # type: ignore[union-attr]
    assert "no agent 'nobody'" in error.content
    assert UnknownAgentError.__name__  # the refusal is this typed error
    assert not [e for e in result.events if e.type in ("message_sent", "context_update")]


def test_a_passivated_receiver_is_activated_by_a_message(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    with Runtime() as runtime:
        bob = runtime.spawn(Agent("bob", model=ScriptedModel(["awake"])), store=store)
        bob.run("first")
        assert bob.passivate()
        ended = turn_ended(bob)
        runtime.spawn(sender("bob")).run("go")
        assert ended.wait(10)
        kinds = [e.type for e in bob.context().events]
        assert "passivated" in kinds
        assert "activated" in kinds
        assert kinds[-1] == "turn_end"
        assert "message_received" in kinds


def test_a_message_to_a_running_agent_waits_for_a_step_boundary_on_the_inline_driver() -> None:
    root = Agent(
        "root",
        model=ScriptedModel(
            [
                ToolCall(id="c1", name="tell", arguments={"to": "root", "text": "note to self"}),
                "read it",
            ]
        ),
        tools=[tell],
    )
    driver = SyncDriver(root)
    result = driver.run("go")
    kinds = [e.type for e in result.events]
    # it arrived while the second step was under way: logged at once, and, the run having
    # ended at that step, added to the transcript after the run (as a steering message is)
    assert kinds.index("message_received") > kinds.index("step_start", kinds.index("tool_result"))
    assert [m.content for m in driver.context.messages][-2:] == [
        "read it",
        "[message from root]\nnote to self",
    ]
    assert result.metadata["last_told"] == "root"


def test_on_message_must_be_run_or_queue() -> None:
    with pytest.raises(AgentDefinitionError, match="on_message"):
        Agent("x", on_message="later")  # type: ignore[arg-type]


@pytest.mark.timeout(120)
def test_a_send_written_but_not_delivered_before_a_crash_is_delivered_once(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "peers.db")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def run(mode: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(SCRIPT), db, mode],
            capture_output=True,
            text=True,
            env=env,
            timeout=50,
            check=False,
        )

    crashed = run("crash")
    assert crashed.returncode == 17, crashed.stderr[-2000:]
    restored = run("restore")
    assert restored.returncode == 0, restored.stderr[-2000:]
    heard, kinds = (json.loads(line) for line in restored.stdout.splitlines())
    assert heard == ["hello"]
    assert kinds.count("turn_start") == 1  # bob started a turn on it
    again = run("again")
    assert again.returncode == 0, again.stderr[-2000:]
    heard_again, kinds_again = (json.loads(line) for line in again.stdout.splitlines())
    assert heard_again == ["hello"]  # sent again on the second restore, and ignored
    assert kinds_again.count("turn_start") == 1


def test_a_message_a_running_agent_logged_before_a_crash_reaches_its_transcript(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "peers.db")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def run(mode: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(SCRIPT), db, mode],
            capture_output=True,
            text=True,
            env=env,
            timeout=50,
            check=False,
        )

    crashed = run("crash-busy")
    assert crashed.returncode == 17, crashed.stderr[-2000:]
    restored = run("restore-busy")
    assert restored.returncode == 0, restored.stderr[-2000:]
    transcript = json.loads(restored.stdout)
    assert transcript.count("[message from alice]\nhello") == 1
