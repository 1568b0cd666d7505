"""Issue 16, item 1: the library says nothing unless the application configured logging, and
`actors.configure_logging` gives console or JSON lines with the agents' ids bound."""

from __future__ import annotations

import doctest
import io
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import actors
from actors import Agent, RunContext, Runtime, configure_logging, tool
from actors._logging import get_logger
from actors.exceptions import StoreError, UserError
from actors.store import MemoryStore
from actors.testing import ScriptedModel, call

from .test_issue12_secrets import run_child


@pytest.fixture(autouse=True)
def _lines_off_again() -> Iterator[None]:
    yield
    configure_logging(None)


def test_using_the_library_writes_nothing_unless_the_application_configured_logging(
    tmp_path: Path,
) -> None:
    # A failing tool, a failing store, a failing model and a provider call retried against a
    # loopback server: each is logged when logging is configured (test_issue12_secrets).
    out, err, report = run_child("quiet", tmp_path)
    assert "RuntimeError: lookup of 'q' failed" in report
    assert "the session store could not write" in report
    assert (out, err) == ("", "")


def test_a_quiet_library_does_not_even_import_structlog() -> None:
    code = (
        "import sys\n"
        "from actors import Agent, Runtime, tool\n"
        "from actors.testing import ScriptedModel, call\n"
        "@tool\n"
        "def boom() -> str:\n"
        "    '''Fail.'''\n"
        "    raise RuntimeError('boom')\n"
        "agent = Agent('a', model=ScriptedModel([call('boom'), 'done']), tools=[boom])\n"
        "with Runtime() as runtime:\n"
        "    runtime.spawn(agent).run('go', timeout=10)\n"
        "print('structlog' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert (done.stdout, done.stderr) == ("False\n", "")


@tool
def boom(ctx: RunContext[Any]) -> str:
    """Fail."""
    raise RuntimeError("boom")


class FullDisk(MemoryStore):
    """Accepts the first write (the spawn), refuses every later one."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def append_events(self, session_id: str, agent_id: str, events: Any) -> None:
        self.writes += 1
        if self.writes > 1:
            raise StoreError("the disk is full")
        super().append_events(session_id, agent_id, events)


def _lines(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_json_lines_carry_the_agent_parent_run_and_session_ids() -> None:
    out = io.StringIO()
    configure_logging("INFO", format="json", stream=out)
    child = Agent("child", model=ScriptedModel([call("boom"), "child done"]), tools=[boom])
    lead = Agent("lead", model=ScriptedModel([call("child", task="t"), "done"]), subagents=[child])
    with Runtime() as runtime:
        runtime.spawn(lead).run("go", timeout=10)
        failing = Agent("solo", model=ScriptedModel(["hi"]))
        with pytest.raises(actors.exceptions.RunFailedError):
            runtime.spawn(failing, store=FullDisk(), session_id="s1").run("go", timeout=10)
    lines = _lines(out)
    (raised,) = [line for line in lines if line["event"] == "tool raised"]
    assert raised["agent_id"] == "lead-sub-1"
    assert raised["parent_id"] == "lead"
    assert raised["run_id"] == "lead-sub-1-run-1"
    assert (raised["level"], raised["logger"]) == ("warning", "actors.effects")
    assert raised["timestamp"].endswith("Z")
    assert list(raised)[:4] == ["timestamp", "level", "logger", "event"]
    assert raised["exception"].startswith("Traceback (most recent call last):")
    persisted = [line for line in lines if line["event"].startswith("could not persist")]
    assert persisted
    assert persisted[0]["agent_id"] == "solo"
    assert persisted[0]["session_id"] == "s1"
    assert persisted[0]["error"] == "the disk is full"


def test_console_lines_are_plain_text_on_a_stream_that_is_not_a_terminal() -> None:
    out = io.StringIO()
    configure_logging("DEBUG", stream=out, tracebacks=False)
    agent = Agent("a", model=ScriptedModel([call("boom"), "done"]), tools=[boom])
    with Runtime() as runtime:
        runtime.spawn(agent).run("go", timeout=10)
    text = out.getvalue()
    assert "tool raised" in text
    assert "agent_id=a" in text
    assert "error_type=RuntimeError" in text
    assert "Traceback" not in text  # tracebacks=False keeps the type and the message
    assert "\x1b[" not in text  # no colors


def test_the_level_filters_and_none_turns_the_lines_off() -> None:
    out = io.StringIO()
    log = get_logger("actors.test").bind(agent_id="a")
    configure_logging("WARNING", format="json", stream=out)
    log.info("hidden")
    log.warning("shown")
    configure_logging(None)
    log.warning("after")
    assert [line["event"] for line in _lines(out)] == ["shown"]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"level": "LOUD"}, "unknown log level 'LOUD'"),
        ({"level": True}, "a log level is a name"),
        ({"format": "xml"}, "unknown log format 'xml'"),
        ({"stream": "stderr"}, "stream must be a text stream with write"),
    ],
)
def test_configure_logging_refuses_what_it_does_not_know(
    kwargs: dict[str, Any], match: str
) -> None:
    with pytest.raises(UserError, match=match):
        configure_logging(**kwargs)


def test_stdlib_logging_gets_records_when_the_application_has_a_handler_for_actors() -> None:
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    logger = logging.getLogger("actors")
    logger.addHandler(handler)
    try:
        agent = Agent("a", model=ScriptedModel([call("boom"), "done"]), tools=[boom])
        with Runtime() as runtime:
            runtime.spawn(agent, tool_context={"api_key": "sk-hidden-1"}).run("go", timeout=10)
    finally:
        logger.removeHandler(handler)
    (record,) = [r for r in records if r.actors["event"] == "tool raised"]  # type: ignore[attr-defined]
    assert record.levelno == logging.WARNING
    assert record.exc_info is None  # the traceback is text in the message, never frames
    message = record.getMessage()
    assert message.startswith("tool raised tool=boom agent_id=a")
    assert "Traceback (most recent call last):" in message
    assert "sk-hidden-1" not in message
    assert record.actors["error"] == "boom"  # type: ignore[attr-defined]


def test_a_log_line_that_cannot_be_written_never_fails_the_run() -> None:
    class Broken(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError("the terminal went away")

    configure_logging("DEBUG", stream=Broken())
    agent = Agent("a", model=ScriptedModel([call("boom"), "done"]), tools=[boom])
    with Runtime() as runtime:
        result = runtime.spawn(agent).run("go", timeout=10)
    assert result.output == "done"


def test_the_docstring_examples_run() -> None:
    import actors._logging
    import actors._safe

    for module in (actors._logging, actors._safe):
        result = doctest.testmod(module)
        assert result.attempted > 0
        assert result.failed == 0
