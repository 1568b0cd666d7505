"""The ``actors`` command, run as a user runs it: in a subprocess, with its own ACTORS_HOME."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import structlog

from actors._logging import current_sink
from actors.cli import main

HERE = Path(__file__).parent
TIMEOUT = 45


@dataclass
class Done:
    code: int
    out: str
    err: str


Actors = Callable[..., Done]


def _subprocess_runner(home: Path) -> Actors:
    """Run the command as a user does: a new interpreter, ``python -m actors.cli``."""

    def actors(*args: str, cwd: Path = HERE, stdin: str = "") -> Done:
        env = {**os.environ, "ACTORS_HOME": str(home), "COLUMNS": "200"}
        env.pop("PYTHONPATH", None)
        proc = subprocess.run(
            [sys.executable, "-m", "actors.cli", *args],
            cwd=cwd,
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
        return Done(proc.returncode, proc.stdout, proc.stderr)

    return actors


@pytest.fixture
def actors(tmp_path: Path) -> Actors:
    return _subprocess_runner(tmp_path / "home")


@pytest.fixture
def inproc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Iterator[Callable[[Path | None], Actors]]:
    """``main(argv)`` in this process (the same code without an interpreter's start-up cost).

    Takes the ACTORS_HOME to use (a fresh one by default).
    """
    monkeypatch.chdir(HERE)
    monkeypatch.syspath_prepend(str(HERE))

    def make(home: Path | None = None) -> Actors:
        monkeypatch.setenv("ACTORS_HOME", str(home or tmp_path / "home"))

        def actors(*args: str, stdin: str = "") -> Done:
            monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
            capsys.readouterr()
            code = main(list(args))
            captured = capsys.readouterr()
            return Done(code, captured.out, captured.err)

        return actors

    before = structlog.get_config()
    yield make
    assert structlog.get_config() == before  # main() leaves logging as it found it
    sys.modules.pop("cli_agents", None)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Done, str]:
    """One finished demo session, run at full speed in a subprocess and timed."""
    home = tmp_path_factory.mktemp("demo") / "home"
    started = time.perf_counter()
    done = _subprocess_runner(home)("demo")
    elapsed = time.perf_counter() - started
    assert done.code == 0, done.err
    assert elapsed < 10, f"the demo took {elapsed:.1f} s"
    match = re.search(r"^session: (\w+)", done.out, re.M)
    assert match, done.out
    return home, done, match.group(1)


def _request_ids(text: str) -> list[str]:
    hint = next(line for line in text.splitlines() if line.startswith("answer with: "))
    return re.findall(r"--answer (\S+)=true", hint)


def _session_of(text: str) -> str:
    match = re.search(r"^session: (\w+)", text, re.M)
    assert match, text
    return match.group(1)


def _error_lines(done: Done) -> list[str]:
    return [line for line in done.err.splitlines() if line.strip()]


# -- the demo --------------------------------------------------------------------------------


def test_demo_runs_offline_and_prints_answer_usage_and_session(
    demo: tuple[Path, Done, str],
) -> None:
    _, done, session_id = demo
    out = done.out
    # Not a terminal: plain progress lines, one per change of an agent.
    assert "[agent] lead  running · step 1" in out
    for name in ("web_researcher", "paper_researcher", "benchmark_researcher", "writer"):
        assert re.search(rf"\[agent\] {name} \(lead-sub-\d\)  finished", out), name
    assert "approved automatically: " in out
    assert "\nanswer\nRun each agent as an actor that owns its own context." in out
    assert "Measured on this machine: ping-pong: 2000 round trips" in out
    usage = out.split("usage per agent\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert usage[0].split() == [
        "agent",
        "spec",
        "requests",
        "input",
        "tok",
        "output",
        "tok",
        "tool",
        "calls",
    ]
    assert [row.split()[0] for row in usage[1:]] == [
        "lead", "lead-sub-1", "lead-sub-2", "lead-sub-3", "lead-sub-4", "total"
    ]  # fmt: skip
    assert usage[-1].split()[1] == "12"  # model requests of the whole tree
    assert re.search(r"lead-sub-3\s+benchmark\s+\{\"workload\": \"ping-pong\"", out)
    assert f"session: {session_id}  (stored in " in out
    assert done.err == ""


def test_sessions_list_shows_the_demo_session(
    demo: tuple[Path, Done, str], inproc: Callable[[Path | None], Actors]
) -> None:
    home, _, session_id = demo
    done = inproc(home)("sessions", "list")
    assert done.code == 0, done.err
    header, row = done.out.splitlines()[:2]
    assert header.split()[:4] == ["session", "root", "agents", "events"]
    assert row.split()[:3] == [session_id, "lead", "5"]


def test_sessions_show_prints_tree_transcripts_and_usage(
    demo: tuple[Path, Done, str], inproc: Callable[[Path | None], Actors]
) -> None:
    home, _, session_id = demo
    done = inproc(home)("sessions", "show", session_id)
    assert done.code == 0, done.err
    out = done.out
    assert out.startswith(f"session {session_id}\n")
    tree = out.split("\ntree\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert tree[0].startswith("lead  idle")
    assert tree[1].startswith("  web_researcher (lead-sub-1)  finished")
    assert tree[4].startswith("  writer (lead-sub-4)  finished")
    assert "open requests" not in out
    assert "\nlead-sub-1 (web_researcher) · finished\n" in out
    assert 'assistant → web_search({"query": "actor model"})' in out
    assert "tool run_benchmark: ping-pong: 2000 round trips" in out
    assert "\nusage per agent\n" in out


def test_sessions_export_writes_the_event_log_as_json_lines(
    demo: tuple[Path, Done, str], inproc: Callable[[Path | None], Actors]
) -> None:
    home, _, session_id = demo
    done = inproc(home)("sessions", "export", session_id)
    assert done.code == 0, done.err
    events = [json.loads(line) for line in done.out.splitlines()]
    by_agent: dict[str, list[int]] = {}
    for event in events:
        assert event["session_id"] == session_id
        by_agent.setdefault(event["agent_id"], []).append(event["seq"])
    assert list(by_agent) == ["lead", "lead-sub-1", "lead-sub-2", "lead-sub-3", "lead-sub-4"]
    for seqs in by_agent.values():
        assert seqs == list(range(len(seqs)))  # each agent's log, whole and in order
    types = [e["type"] for e in events if e["agent_id"] == "lead"]
    assert types.count("subagent_spawned") == 4
    assert {e["parent_id"] for e in events if e["agent_id"] != "lead"} == {"lead"}


def test_demo_defer_leaves_the_approval_open_and_resume_answers_it(
    actors: Actors, inproc: Callable[[Path | None], Actors], tmp_path: Path
) -> None:
    done = actors("demo", "--pace", "0", "--defer")
    assert done.code == 0, done.err
    assert "\nsuspended\n1 request(s) wait for an answer:\n" in done.out
    session_id = _session_of(done.out)
    (request_id,) = _request_ids(done.out)
    assert f"answer with: actors sessions resume {session_id} --answer {request_id}=true" in (
        done.out
    )
    local = inproc(tmp_path / "home")
    shown = local("sessions", "show", session_id)
    assert f"\nopen requests\n{request_id} (approval) from lead-sub-3: " in shown.out
    assert "benchmark_researcher (lead-sub-3)  suspended" in shown.out

    # Another process restores the stored tree and routes the answer down to the researcher.
    resumed = actors("sessions", "resume", session_id, "--answer", f"{request_id}=true")
    assert resumed.code == 0, resumed.err
    assert "\nanswer\nRun each agent as an actor" in resumed.out
    assert "Measured on this machine" in resumed.out

    again = local("sessions", "resume", session_id, "--answer", f"{request_id}=true")
    assert again.code == 1
    assert _error_lines(again) == [
        f"actors: error: session {session_id} has no open requests",
        f"hint: see what it holds with 'actors sessions show {session_id}'",
    ]


def test_demo_interactive_asks_and_a_no_is_respected(
    inproc: Callable[[Path | None], Actors],
) -> None:
    done = inproc(None)("demo", "--pace", "0", "--interactive", stdin="n\n")
    assert done.code == 0, done.err
    assert "declined: " in done.out
    assert "The benchmark was not approved, so there is no measurement." in done.out


# -- actors run ------------------------------------------------------------------------------


def test_run_passes_tool_context_and_continues_a_session(
    actors: Actors, inproc: Callable[[Path | None], Actors], tmp_path: Path
) -> None:
    first = actors(
        "run", "cli_agents:greeter", "hi", "--tool-context", '{"user": "ada"}', "--session", "s1"
    )
    assert first.code == 0, first.err
    assert first.out == "hello ada (en), turn 1\n"
    assert first.err == "session: s1\n"
    # A file path works too; another process goes on where the first stopped.
    second = actors(
        "run", str(HERE / "cli_agents.py") + ":make_greeter", "again",
        "--tool-context", '{"user": "ada"}', "--session", "s1",
    )  # fmt: skip
    assert second.code == 0, second.err
    assert second.out == "hello ada (en), turn 2\n"
    shown = inproc(tmp_path / "home")("sessions", "show", "s1")
    assert shown.out.count("\nuser: ") == 2


def test_run_sets_initial_metadata(inproc: Callable[[Path | None], Actors]) -> None:
    done = inproc(None)("run", "cli_agents:greeter", "hi", "--metadata", '{"lang": "fr"}')
    assert done.code == 0, done.err
    assert done.out == "hello nobody (fr), turn 1\n"


def test_log_format_json_writes_the_librarys_warnings_as_json_lines(
    inproc: Callable[[Path | None], Actors],
) -> None:
    done = inproc(None)("run", "cli_agents:failing", "go", "--log-format", "json")
    assert done.code == 0, done.err
    assert done.out == "Sorry, it broke.\n"
    lines = [json.loads(line) for line in done.err.splitlines() if line.startswith("{")]
    (raised,) = [line for line in lines if line["event"] == "tool raised"]
    assert (raised["level"], raised["agent_id"], raised["run_id"]) == (
        "warning",
        "failing",
        "failing-run-1",
    )
    assert (raised["error_type"], raised["error"]) == ("RuntimeError", "the tool broke")
    assert "exception" not in raised  # the traceback only with --debug
    assert current_sink() is None  # called from Python, the command leaves logging quiet


def test_debug_shows_debug_lines_and_tracebacks_on_the_console(
    inproc: Callable[[Path | None], Actors],
) -> None:
    done = inproc(None)("--debug", "run", "cli_agents:failing", "go")
    assert done.code == 0, done.err
    assert "tool raised" in done.err
    assert 'raise RuntimeError("the tool broke")' in done.err
    assert not done.err.lstrip().startswith("{")


def test_run_suspends_on_approval_and_resume_can_decline(actors: Actors) -> None:
    done = actors("run", "cli_agents:guarded", "clean up")
    assert done.code == 0, done.err
    assert "(approval) from guarded: Allow the tool 'delete_file' to run?" in done.out
    (request_id,) = _request_ids(done.out)
    session_id = done.err.strip().removeprefix("session: ")

    answer = f'{request_id}={{"ok": false, "reason": "not today"}}'
    resumed = actors("sessions", "resume", session_id, "--answer", answer)
    assert resumed.code == 0, resumed.err
    assert "\nanswer\nresult: " in resumed.out
    assert "not today" in resumed.out
    assert "deleted" not in resumed.out.split("\nanswer\n", 1)[1]


def test_run_approved_at_the_prompt(inproc: Callable[[Path | None], Actors]) -> None:
    done = inproc(None)("run", "cli_agents:guarded", "clean up", "--interactive", stdin="y\n")
    assert done.code == 0, done.err
    assert done.out.endswith("result: deleted /tmp/x\n")


# -- errors: one line and a hint, never a traceback ------------------------------------------


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["run", "no_such_module:agent", "x"], 2, "cannot find module 'no_such_module'"),
        (["run", "cli_agents:nope", "x"], 2, "cli_agents has no attribute 'nope'"),
        (["run", "cli_agents:not_an_agent", "x"], 2, "cli_agents:not_an_agent is a int"),
        (["run", "cli_agents", "x"], 2, "'cli_agents' does not name an agent"),
        (["run", "cli_agents:greeter", "x", "--tool-context", "{bad"], 2, "--tool-context is"),
        (["run", "cli_agents:greeter", "x", "--metadata", "[1]"], 2, "--metadata must be a JSON"),
        (["sessions", "list"], 1, "no session database at "),
        (["sessions", "resume", "s", "--answer", "nope"], 2, "--answer 'nope' is not"),
        (["demo", "--model", "nosuch:model"], 1, "cannot tell the provider of model"),
        (["demo", "--model", "openai:gpt-4o-mini"], 1, "agent 'lead': the model failed: "),
        (["demo", "--interactive", "--defer"], 2, "argument --defer: not allowed with"),
        (["frobnicate"], 2, "argument COMMAND: invalid choice: 'frobnicate'"),
    ],
)
def test_errors_are_one_line_and_a_hint(
    inproc: Callable[[Path | None], Actors], args: list[str], code: int, message: str
) -> None:
    done = inproc(None)(*args)
    assert done.code == code
    lines = _error_lines(done)
    assert len(lines) == 2, done.err
    assert lines[0].startswith("actors: error: ")
    assert message in lines[0]
    assert lines[1].startswith("hint: ")
    assert "Traceback" not in done.err


def test_unknown_session_and_request(inproc: Callable[[Path | None], Actors]) -> None:
    actors = inproc(None)
    assert actors("run", "cli_agents:greeter", "hi", "--session", "known").code == 0
    missing = actors("sessions", "show", "unknown")
    assert missing.code == 1
    assert _error_lines(missing)[1] == "hint: list the stored sessions with 'actors sessions list'"
    assert actors("run", "cli_agents:guarded", "x", "--session", "g").code == 0
    wrong = actors("sessions", "resume", "g", "--answer", "no-such-request=true")
    assert wrong.code == 1
    lines = _error_lines(wrong)
    assert len(lines) == 2, wrong.err
    assert "no-such-request" in lines[0]


def test_no_traceback_unless_debug(inproc: Callable[[Path | None], Actors]) -> None:
    actors = inproc(None)
    plain = actors("run", "cli_agents:nope", "x")
    assert plain.code == 2
    assert "Traceback" not in plain.err
    assert len(_error_lines(plain)) == 2
    debug = actors("--debug", "run", "cli_agents:nope", "x")
    assert debug.code == 2
    assert "Traceback (most recent call last)" in debug.err
    assert "actors: error: cli_agents has no attribute 'nope'" in debug.err


def test_help_lists_the_commands(inproc: Callable[[Path | None], Actors]) -> None:
    done = inproc(None)("--help")
    assert done.code == 0
    for command in ("demo", "run", "sessions"):
        assert command in done.out
    assert "ACTORS_HOME" in done.out


def test_a_session_of_library_code_shows_but_needs_python_to_resume(
    inproc: Callable[[Path | None], Actors], tmp_path: Path
) -> None:
    from cli_agents import guarded  # type: ignore[import-not-found]

    from actors import Runtime
    from actors.store import SQLiteStore

    home = tmp_path / "lib-home"
    home.mkdir()
    with SQLiteStore(home / "sessions.sqlite") as store, Runtime() as runtime:
        result = runtime.spawn(guarded, store=store, session_id="lib").run("Clean up.")
    (request,) = result.requests

    actors = inproc(home)
    shown = actors("sessions", "show", "lib")
    assert shown.code == 0, shown.err
    assert f"\nopen requests\n{request.id} (approval) from guarded: " in shown.out
    resumed = actors("sessions", "resume", "lib", "--answer", f"{request.id}=true")
    assert resumed.code == 1
    assert "was not started by the actors command" in _error_lines(resumed)[0]
    assert _error_lines(resumed)[1].startswith("hint: restore it from Python: Runtime().restore(")


def test_demo_with_model_runs_the_same_tree_over_http(
    inproc: Callable[[Path | None], Actors], monkeypatch: pytest.MonkeyPatch
) -> None:
    from fake_openai import fake_openai  # type: ignore[import-not-found]

    monkeypatch.setenv("ACTORS_ALLOW_MODEL_REQUESTS", "1")  # to a loopback server only
    with fake_openai() as url:
        done = inproc(None)("demo", "--pace", "0", "--model", f"openai-compatible:fake@{url}")
    assert done.code == 0, done.err
    assert "approved automatically: " in done.out  # the benchmark tool still asks
    assert "\nanswer\nfake answer\n" in done.out
    usage = done.out.split("usage per agent\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert [row.split()[0] for row in usage[1:]] == [
        "lead", "lead-sub-1", "lead-sub-2", "lead-sub-3", "lead-sub-4", "total"
    ]  # fmt: skip


def test_sessions_show_notes_each_compaction_and_full_shows_what_it_shadows(
    inproc: Callable[[Path | None], Actors], tmp_path: Path
) -> None:
    from actors import Agent, Compaction, Runtime
    from actors.store import SQLiteStore
    from actors.testing import FunctionModel

    def reply(messages: list[Any], tools: list[Any]) -> str:
        if "compact the transcript" in messages[0].content:
            return "counted to a dozen"
        return f"noted {messages[-1].content}"

    agent = Agent(
        "counter",
        model=FunctionModel(reply),
        context_window=200,
        compaction=Compaction(keep_last_turns=2),
    )
    home = tmp_path / "home"
    home.mkdir()
    with Runtime() as runtime:
        ref = runtime.spawn(agent, store=SQLiteStore(home / "sessions.sqlite"), session_id="c")
        for n in range(30):
            ref.run(f"number {n}")
    short = inproc(home)("sessions", "show", "c")
    assert short.code == 0, short.err
    assert re.search(
        r"\[compacted at event \d+: \d+ earlier messages summarised by function", short.out
    )
    assert "user: number 0\n" not in short.out  # shadowed: in view only with --full
    full = inproc(home)("sessions", "show", "c", "--full")
    assert "  | user: number 0\n" in full.out  # the log keeps what the summary shadows
    assert "user: [Summary of the earlier conversation]" in full.out


def _session_with_parts(home: Path) -> Any:
    """A stored session whose messages hold a screenshot and a PDF; its context."""
    from actors import AgentContext, ToolResultMessage, UserMessage
    from actors.context._parts import DocumentPart
    from actors.store import AgentRecord, SQLiteStore
    from actors.store.conformance import screenshot

    ctx = AgentContext("viewer")
    ctx.add_message(UserMessage(content=["What is on screen?", screenshot(1, size=20_000)]))
    pdf = DocumentPart(data=b"%PDF-1.4 x", media_type="application/pdf", name="r.pdf")
    ctx.add_message(ToolResultMessage(tool_call_id="c1", tool_name="fetch", content=[pdf]))
    home.mkdir(exist_ok=True)
    with SQLiteStore(home / "sessions.sqlite") as store:
        store.create_session("parts", root_agent_id="viewer")
        store.put_agent("parts", AgentRecord("viewer", None, "viewer", "idle"))
        store.append_events("parts", "viewer", ctx.events)
    return ctx


def test_sessions_show_prints_parts_as_placeholders(
    inproc: Callable[[Path | None], Actors], tmp_path: Path
) -> None:
    ctx = _session_with_parts(tmp_path / "home")
    shown = inproc(tmp_path / "home")("sessions", "show", "parts", "--full")
    assert shown.code == 0, shown.err
    assert "user: What is on screen?\n    [image image/png, 20.0 kB]" in shown.out
    assert "tool fetch: [document application/pdf, 10 B, r.pdf]" in shown.out
    assert ctx.messages[0].content[1].data[:40] not in shown.out


def test_sessions_export_writes_parts_inline_and_they_read_back(
    inproc: Callable[[Path | None], Actors], tmp_path: Path
) -> None:
    from actors import AgentContext, Event

    ctx = _session_with_parts(tmp_path / "home")
    done = inproc(tmp_path / "home")("sessions", "export", "parts")
    assert done.code == 0, done.err
    lines = [json.loads(line) for line in done.out.splitlines()]
    assert lines[0]["data"]["content"][1]["data"] == ctx.messages[0].content[1].data
    events = [
        Event(seq=line["seq"], type=line["type"], data=line["data"], created_at=line["created_at"])
        for line in lines
    ]
    assert AgentContext.from_events(events).messages == ctx.messages


def test_sessions_log_summarises_parts_as_placeholders(
    inproc: Callable[[Path | None], Actors], tmp_path: Path
) -> None:
    ctx = _session_with_parts(tmp_path / "home")
    done = inproc(tmp_path / "home")("sessions", "log", "parts", "--plain")
    assert done.code == 0, done.err
    assert "What is on screen? [image image/png, 20.0 kB]" in done.out
    assert ctx.messages[0].content[1].data[:20] not in done.out
