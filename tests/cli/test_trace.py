"""``actors trace ID`` and ``--trace PATH`` on ``demo`` and ``run``, as a user runs them."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from actors.cli import main
from actors.store import SQLiteStore
from actors.trace import render_trace

HERE = Path(__file__).parent
TIMEOUT = 45


@dataclass
class Done:
    code: int
    out: str
    err: str

    def errors(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


Actors = Callable[..., Done]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def actors(
    home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Actors:
    """``main(argv)`` in this process, in a fresh folder with its own ACTORS_HOME."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.setenv("ACTORS_HOME", str(home))
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))

    def run(*args: str) -> Done:
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return Done(code, captured.out, captured.err)

    return run


def page_data(path: Path) -> dict[str, object]:
    text = path.read_text(encoding="utf-8")
    match = re.search(r'<script type="application/json" id="trace-data">(.*?)</script>', text, re.S)
    assert match, "no embedded data"
    return json.loads(match.group(1))  # type: ignore[no-any-return]


def _session_of(text: str) -> str:
    match = re.search(r"^session: (\w+)", text, re.M)
    assert match, text
    return match.group(1)


def test_demo_writes_its_trace_when_it_ends(home: Path, tmp_path: Path) -> None:
    target = tmp_path / "demo trace.html"
    env = {**os.environ, "ACTORS_HOME": str(home)}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(
        [sys.executable, "-m", "actors.cli", "demo", "--pace", "0", "--trace", str(target)],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"\ntrace: {target}\n" in proc.stdout
    data = page_data(target)
    lanes = data["lanes"]
    assert isinstance(lanes, list)
    assert [lane["id"] for lane in lanes] == [
        "lead", "lead-sub-1", "lead-sub-2", "lead-sub-3", "lead-sub-4"
    ]  # fmt: skip
    session = data["session"]
    assert isinstance(session, dict)
    assert session["id"] == _session_of(proc.stdout)


def test_trace_writes_the_page_of_a_stored_session(
    actors: Actors, home: Path, tmp_path: Path
) -> None:
    session_id = _session_of(actors("demo", "--pace", "0", "--plain").out)
    target = tmp_path / "out.html"
    done = actors("trace", session_id, "-o", str(target))
    assert done.code == 0, done.err
    assert done.out == f"trace: {target}  (open {target.as_uri()} in a browser)\n"
    with SQLiteStore(home / "sessions.sqlite") as store:
        assert target.read_text(encoding="utf-8") == render_trace(store.load(session_id))


def test_trace_writes_next_to_you_by_default_or_to_stdout(actors: Actors) -> None:
    session_id = _session_of(actors("demo", "--pace", "0", "--plain").out)
    done = actors("trace", session_id)
    assert done.code == 0, done.err
    default = Path(f"trace-{session_id}.html")
    assert done.out.startswith(f"trace: {default}  (open file://")
    piped = actors("trace", session_id, "-o", "-")
    assert piped.code == 0, piped.err
    assert piped.out == default.read_text(encoding="utf-8")


def test_trace_of_an_unknown_session_says_how_to_find_one(actors: Actors) -> None:
    actors("demo", "--pace", "0", "--plain")
    done = actors("trace", "nope", "-o", "t.html")
    assert done.code == 1
    assert done.errors()[0].startswith("actors: error: no session 'nope' in ")
    assert done.errors()[1] == "hint: list the stored sessions with 'actors sessions list'"
    assert not Path("t.html").exists()


def test_trace_without_a_database_says_how_to_make_one(actors: Actors, home: Path) -> None:
    done = actors("trace", "abc")
    assert done.code == 1
    assert done.errors() == [
        f"actors: error: no session database at {home / 'sessions.sqlite'}",
        "hint: run 'actors demo' or 'actors run' first, or pass --db PATH or --store DSN",
    ]


@pytest.mark.parametrize(
    ("args", "message", "hint"),
    [
        (
            ["trace", "abc", "-o", "missing/t.html"],
            "no folder missing for -o missing/t.html",
            "create the folder first, or write the trace somewhere else",
        ),
        (
            ["demo", "--pace", "0", "--trace", "."],
            "--trace . is a folder",
            "name a file, e.g. --trace trace.html",
        ),
        (
            ["run", "trace_agents:helper", "hi", "--trace", "missing/t.html"],
            "no folder missing for --trace missing/t.html",
            "create the folder first, or write the trace somewhere else",
        ),
    ],
)
def test_a_trace_path_that_cannot_be_written_is_refused_before_anything_runs(
    actors: Actors, home: Path, args: list[str], message: str, hint: str
) -> None:
    if args[0] == "trace":
        actors("demo", "--pace", "0", "--plain")
    done = actors(*args)
    assert done.code == 2
    assert done.errors() == [f"actors: error: {message}", f"hint: {hint}"]
    if args[0] != "trace":  # refused before a session was even created
        assert not (home / "sessions.sqlite").exists()


def test_run_writes_the_trace_and_keeps_stdout_for_the_answer(actors: Actors) -> None:
    done = actors("run", "trace_agents:helper", "hi", "--trace", "run.html")
    assert done.code == 0, done.err
    assert done.out == "all done\n"
    assert "trace: run.html" in done.errors()
    data = page_data(Path("run.html"))
    lanes = data["lanes"]
    assert isinstance(lanes, list)
    assert [lane["id"] for lane in lanes] == ["helper"]


def test_a_failed_run_still_writes_its_trace(actors: Actors) -> None:
    done = actors("run", "trace_agents:broken", "hi", "--trace", "failed.html")
    assert done.code == 1
    assert "trace: failed.html" in done.errors()
    assert done.errors()[-2].startswith("actors: error: agent 'broken': the model failed")
    data = page_data(Path("failed.html"))
    (lane,) = data["lanes"]  # type: ignore[misc]
    assert [span[:1] + span[4:5] for span in lane["spans"]] == [
        ["turn", "error"],
        ["model", "error"],
    ]
    assert [marker[0] for marker in lane["markers"]] == ["error"]
