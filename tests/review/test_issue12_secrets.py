"""Issue 12, finding 1: a tool_context value never reaches a log line, a traceback's locals, a
repr, an exception message, an event or the store, whatever the logging configuration."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import structlog

from actors import Agent, RunContext, Runtime, tool
from actors.loop._types import CallTool
from actors.testing import ScriptedModel, call

from .logging_child import KEY, MODES, SECRET

CHILD = Path(__file__).with_name("logging_child.py")
ROOT = Path(__file__).parents[2]

# What the child's failures make the library log, in every mode that shows log lines.
LOGGED = ("tool raised", "could not persist events", "model.retry")


def run_child(mode: str, folder: Path) -> tuple[str, str, str]:
    """Run the child in ``mode``; return its stdout, stderr and report."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "400"}  # rich wraps at 80
    done = subprocess.run(
        [sys.executable, str(CHILD), mode, str(folder)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=folder,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout, done.stderr, (folder / "report.txt").read_text()


@pytest.mark.parametrize("mode", MODES)
def test_a_tool_context_secret_appears_nowhere_whatever_the_logging_setup(
    mode: str, tmp_path: Path
) -> None:
    out, err, report = run_child(mode, tmp_path)

    # The run exercised every failure, and the library reported them where the mode sends logs.
    assert "tool_context=<ReadOnlyMapping>" in report  # a tool's RunContext, as its repr shows it
    assert "RuntimeError: lookup of 'q' failed" in report  # the tool's error result
    assert "the session store could not write" in report  # the store failed the run
    assert "the model is down" in report
    if mode == "structlog-capture":
        shown = report
    elif mode == "quiet":
        shown = ""
    else:
        shown = out + err
    for event in LOGGED if mode != "quiet" else ():
        assert event in shown, f"{event!r} was not logged in mode {mode}"

    for text in (out, err, report):
        assert SECRET not in text
        assert KEY not in text
    files = list(tmp_path.iterdir())
    assert any(path.name == "sessions.sqlite" for path in files)
    for path in files:  # the database with its write-ahead log
        assert SECRET.encode() not in path.read_bytes()


def test_run_context_repr_shows_the_tool_context_type_only() -> None:
    ctx = RunContext(tool_context={"api_key": SECRET}, agent_id="a", tool_name="t")
    shown = repr(ctx)
    assert SECRET not in shown
    assert "tool_context=<dict>" in shown
    assert "agent_id='a'" in shown
    assert "tool_name='t'" in shown


def test_no_library_object_holding_a_tool_context_shows_it_in_its_repr() -> None:
    seen: list[str] = []

    @tool
    def peek(ctx: RunContext[Any]) -> str:
        """Peek."""
        seen.append(repr(ctx))
        return "ok"

    agent = Agent("a", model=ScriptedModel([call("peek"), "done"]), tools=[peek])
    with Runtime() as runtime:
        ref = runtime.spawn(agent, tool_context={"api_key": SECRET})
        result = ref.run("go", timeout=10)
        seen += [repr(ref), repr(ref.tree()), repr(result), repr(ref.context())]
    effect = CallTool("r", call("peek"), peek, {}, RunContext(tool_context={"k": SECRET}), None)
    seen.append(repr(effect))
    assert len(seen) == 6
    for text in seen:
        assert SECRET not in text


def test_capture_logs_sees_an_exception_as_text_never_as_an_object() -> None:
    @tool
    def boom(ctx: RunContext[Any]) -> str:
        """Fail."""
        raise RuntimeError("boom")

    agent = Agent("a", model=ScriptedModel([call("boom"), "done"]), tools=[boom])
    with structlog.testing.capture_logs() as logs, Runtime() as runtime:
        runtime.spawn(agent, tool_context={"api_key": SECRET}).run("go", timeout=10)
    (entry,) = [e for e in logs if e["event"] == "tool raised"]
    assert "exc_info" not in entry
    assert not any(isinstance(value, BaseException) for value in entry.values())
    assert (entry["error_type"], entry["error"]) == ("RuntimeError", "boom")
    assert 'raise RuntimeError("boom")' in entry["exception"]
    assert SECRET not in repr(logs)
