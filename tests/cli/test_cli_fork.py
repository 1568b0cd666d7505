"""``actors sessions log|fork|rewind``."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from actors import Agent, Runtime
from actors.cli import main
from actors.store import SQLiteStore
from actors.testing import FunctionModel


def _session(home: Path) -> None:
    home.mkdir()
    agent = Agent("chat", model=FunctionModel(lambda m, t: f"re: {m[-1].content}"))
    with SQLiteStore(home / "sessions.sqlite") as store, Runtime() as runtime:
        ref = runtime.spawn(agent, store=store, session_id="s1", agent_id="s1")
        ref.run("first question", timeout=10)
        ref.run("second question", timeout=10)


def _actors(
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *args: str,
    stdin: str = "",
) -> tuple[int, str, str]:
    monkeypatch.setenv("ACTORS_HOME", str(home))
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    capsys.readouterr()
    code = main([*args, "--plain"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _turn_ends(out: str) -> list[int]:
    return [int(line.split()[0]) for line in out.splitlines() if " turn_end " in f"{line} "]


def test_log_lists_events_with_their_seqs_and_fork_branches_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    _session(home)
    code, out, err = _actors(home, monkeypatch, capsys, "sessions", "log", "s1")
    assert code == 0, err
    assert out.splitlines()[0].split() == ["seq", "type", "created", "summary"]
    assert "user_message" in out
    assert "first question" in out
    first_end = _turn_ends(out)[0]

    code, out, err = _actors(
        home, monkeypatch, capsys, "sessions", "fork", "s1", "--at", str(first_end)
    )
    assert code == 0, err
    assert f"forked s1 at {first_end}: session s1-fork-1" in out
    code, out, err = _actors(home, monkeypatch, capsys, "sessions", "log", "s1-fork-1")
    assert code == 0, err
    assert out.splitlines()[0] == f"forked from s1 at {first_end}"
    assert "first question" in out
    assert "second question" not in out
    code, _, err = _actors(home, monkeypatch, capsys, "sessions", "fork", "s1", "--at", "999")
    assert code != 0
    assert "no event 999" in err


def test_rewind_asks_first_and_keeps_what_came_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    _session(home)
    _, out, _ = _actors(home, monkeypatch, capsys, "sessions", "log", "s1")
    first_end = _turn_ends(out)[0]
    at = str(first_end)
    code, out, _ = _actors(home, monkeypatch, capsys, "sessions", "rewind", "s1", "--at", at)
    assert code == 1  # no answer: nothing changes
    assert "not rewound" in out
    code, out, err = _actors(
        home, monkeypatch, capsys, "sessions", "rewind", "s1", "--at", at, stdin="y\n"
    )
    assert code == 0, err
    assert f"rewound s1 to {at}; what came after is session s1-rewound-1" in out
    _, out, _ = _actors(home, monkeypatch, capsys, "sessions", "log", "s1")
    assert "second question" not in out
    _, out, _ = _actors(home, monkeypatch, capsys, "sessions", "log", "s1-rewound-1")
    assert "second question" in out
