"""The SDK is imported only when A2A is used, and a missing one names the extra."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("a2a")
pytest.importorskip("starlette")

from actors.exceptions import UserError
from actors.serve import _a2a_door

ROOT = Path(__file__).resolve().parent.parent.parent


def _python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_import_actors_and_serve_do_not_import_the_sdk() -> None:
    out = _python(
        "import sys, actors, actors.serve\n"
        "print(sorted(m for m in sys.modules if m == 'a2a' or m.startswith('a2a.')))\n"
        "actors.serve.a2a_routes\n"
        "print('a2a' in sys.modules)\n"
    )
    assert out.split("\n")[:2] == ["[]", "True"]


def test_a_missing_sdk_names_the_extra() -> None:
    out = _python(
        "import sys, importlib.util\n"
        "sys.modules['a2a'] = None  # as if the SDK were not installed\n"
        "find = importlib.util.find_spec\n"
        "importlib.util.find_spec = lambda name, *a: None if name == 'a2a' else find(name, *a)\n"
        "for load in ('import actors.a2a', 'from actors.serve import a2a_routes'):\n"
        "    try:\n"
        "        exec(load)\n"
        "    except ImportError as exc:\n"
        "        print(exc)\n"
    )
    lines = out.strip().split("\n")
    assert len(lines) == 2
    assert all("pip install 'actors[a2a]'" in line for line in lines)


def test_serve_opens_the_door_when_asked_or_when_the_sdk_is_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    routes, public = _a2a_door.a2a_door(None, bearer=False)
    assert {getattr(r, "path", "") for r in routes} == {"/a2a", "/.well-known/agent-card.json"}
    assert public == {"/.well-known/agent-card.json"}
    assert _a2a_door.a2a_door(False, bearer=False) == ([], frozenset())
    monkeypatch.setattr(_a2a_door, "a2a_installed", lambda: False)
    assert _a2a_door.a2a_door(None, bearer=False) == ([], frozenset())
    with pytest.raises(UserError, match=r"actors\[a2a\]"):
        _a2a_door.a2a_door(True, bearer=False)
