"""Issue 12, finding 7: whatever a store hands back, `Runtime.restore` succeeds or raises an
`actors.exceptions` type that names the session, the agent and the event; it never leaves
agents behind.

The fuzz test mutates the stored events of real sessions (a tree suspended three levels deep, a
kept child, a fan-out of children with tools, a turn cut by a crash with a steering message in
flight) the way a damaged or hand-edited file would, with a seeded generator so a failure
replays.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from actors import Agent, AgentContext, Runtime
from actors.exceptions import ActorsError, SerializationError
from actors.store import SQLiteStore
from actors.testing import ScriptedModel

from .stored_sessions import specs, write_sessions

# Damaged sessions per run (about 2 s); ACTORS_FUZZ_CASES=5000 for a long hunt.
CASES = int(os.environ.get("ACTORS_FUZZ_CASES", "200"))

TYPES = [
    "turn_start", "turn_end", "step_start", "step_end", "tool_call", "request_header",
    "context_update", "usage", "subagent_spawned", "subagent_finished", "suspended", "resumed",
    "cancelled", "error", "steered", "recovered", "replace", "system_message", "user_message",
    "assistant_message", "tool_result", "app.note",
]  # fmt: skip
READ = {"subagent_spawned", "suspended", "resumed", "tool_call", "steered", "turn_start", "usage"}
KEYS = ["id", "name", "child_id", "request", "tool_call", "run_id", "content", "keep", "x"]
JUNK: list[Any] = [None, True, False, 0, -1, 7, 2**70, 1.5, "", "x", "turn_start", [], {}]


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    path = tmp_path_factory.mktemp("sessions") / "base.sqlite"
    return path, write_sessions(path)


def _junk(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth < 2 and roll < 0.2:
        return {rng.choice(KEYS): _junk(rng, depth + 1)}
    if depth < 2 and roll < 0.3:
        return [_junk(rng, depth + 1)]
    return rng.choice(JUNK)


def _mutate_value(rng: random.Random, data: Any) -> Any:
    """``data`` with one value somewhere inside replaced, removed, or one level deeper."""
    if not isinstance(data, dict | list) or not data or rng.random() < 0.15:
        return _junk(rng)
    if isinstance(data, dict):
        key = rng.choice(list(data))
        roll = rng.random()
        if roll < 0.3:
            return {k: v for k, v in data.items() if k != key}
        return {**data, key: _mutate_value(rng, data[key]) if roll < 0.6 else _junk(rng)}
    index = rng.randrange(len(data))
    return [*data[:index], _mutate_value(rng, data[index]), *data[index + 1 :]]


def _damage(rng: random.Random, path: Path) -> None:
    """Change one to three rows of the file as a bad edit, a bug or a bad disk would."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA synchronous = OFF")  # a scratch copy: no fsync needed
    rows = conn.execute("SELECT session_id, agent_id, seq, data, type FROM events").fetchall()
    # Events whose fields the loop, recovery and restore read are damaged more often.
    weights = [20 if row[4] in READ else 1 for row in rows]
    for _ in range(rng.randint(1, 3)):
        session_id, agent_id, seq, data, kind = rng.choices(rows, weights)[0]
        where = (session_id, agent_id, seq)
        roll = rng.random()
        if roll < 0.55:
            payload = json.loads(data)
            if kind in READ and payload and rng.random() < 0.5:  # a field the library reads
                key = rng.choice(list(payload))
                payload = {k: v for k, v in payload.items() if k != key}
                if rng.random() < 0.5:
                    payload[key] = _junk(rng)
                mutated = json.dumps(payload)
            else:
                mutated = json.dumps(_mutate_value(rng, payload))
            conn.execute(
                "UPDATE events SET data = ? WHERE session_id = ? AND agent_id = ? AND seq = ?",
                (mutated, *where),
            )
        elif roll < 0.7:
            conn.execute(
                "UPDATE events SET type = ? WHERE session_id = ? AND agent_id = ? AND seq = ?",
                (rng.choice(TYPES), *where),
            )
        elif roll < 0.78:
            conn.execute(
                "DELETE FROM events WHERE session_id = ? AND agent_id = ? AND seq = ?", where
            )
        elif roll < 0.84:
            conn.execute(
                "UPDATE events SET data = ? WHERE session_id = ? AND agent_id = ? AND seq = ?",
                (rng.choice(rows)[3], *where),  # another event's payload
            )
        elif roll < 0.88:
            conn.execute(
                "UPDATE events SET created_at = ? WHERE session_id = ? AND agent_id = ?"
                " AND seq = ?",
                (rng.choice(["yesterday", "2020-13-01", 5]), *where),
            )
        elif roll < 0.94:
            column = rng.choice(["parent_id", "name", "status", "position"])
            value = rng.choice([None, "", "deep", "kept-sub-1", "running", "suspended", -1, 3])
            with contextlib.suppress(sqlite3.IntegrityError):  # NOT NULL columns refuse None
                conn.execute(
                    f"UPDATE agents SET {column} = ? WHERE session_id = ? AND agent_id = ?",
                    (value, session_id, agent_id),
                )
        else:
            conn.execute(
                "UPDATE events SET data = ? WHERE session_id = ? AND agent_id = ? AND seq = ?",
                (json.dumps(_junk(rng)), *where),
            )
    conn.commit()
    conn.close()


def _agents() -> list[Agent[Any]]:
    return [*specs(), Agent("crash", model=ScriptedModel([]))]


def test_restore_of_damaged_sessions_succeeds_or_raises_a_typed_error(
    stored: tuple[Path, list[str]], tmp_path: Path
) -> None:
    base, session_ids = stored
    outcomes: dict[str, int] = {}
    for seed in range(CASES):
        rng = random.Random(seed)
        path = tmp_path / f"case-{seed}.sqlite"
        shutil.copy(base, path)
        _damage(rng, path)
        session_id = rng.choice(session_ids)
        with SQLiteStore(path) as store, Runtime() as runtime:
            try:
                ref = runtime.restore(session_id, store=store, agents=_agents())
            except ActorsError as error:
                outcome = type(error).__name__
                assert runtime.live_agents() == 0, f"seed {seed}: a failed restore left agents"
            except Exception as error:  # pragma: no cover - what the test exists to catch
                raise AssertionError(f"seed {seed}: restore of {session_id!r} raised") from error
            else:
                outcome = "restored"
                ref.context()
                ref.tree()
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        path.unlink()
    # The damage was real: some sessions were refused, and most were still read.
    assert outcomes.get("SerializationError", 0) > CASES // 20
    assert outcomes.get("restored", 0) > CASES // 2


def _with_event(tmp_path: Path, base: Path, session_id: str, change: Any) -> Path:
    """A copy of the stored sessions with the first event ``change`` picks changed."""
    path = tmp_path / "edited.sqlite"
    shutil.copy(base, path)
    conn = sqlite3.connect(path)
    rows = conn.execute(
        "SELECT agent_id, seq, type, data FROM events WHERE session_id = ? ORDER BY agent_id, seq",
        (session_id,),
    ).fetchall()
    for agent_id, seq, kind, data in rows:
        edited = change(kind, json.loads(data))
        if edited is not None:
            conn.execute(
                "UPDATE events SET data = ? WHERE session_id = ? AND agent_id = ? AND seq = ?",
                (json.dumps(edited), session_id, agent_id, seq),
            )
            break
    conn.commit()
    conn.close()
    return path


@pytest.mark.parametrize(
    ("session_id", "change", "match"),
    [
        (
            "deep",
            lambda kind, data: (
                {k: v for k, v in data.items() if k != "child_id"}
                if kind == "subagent_spawned"
                else None
            ),
            r"session 'deep': agent 'deep': event \d+ \(subagent_spawned\).*child_id",
        ),
        (
            "deep",
            lambda kind, data: (
                {**data, "request": {"id": "r", "kind": 5}} if kind == "suspended" else None
            ),
            r"session 'deep': agent 'deep-sub-1-sub-1': event \d+ \(suspended\).*request",
        ),
        (
            "kept",
            lambda kind, data: {**data, "name": {"a": 1}} if kind == "subagent_spawned" else None,
            r"session 'kept': agent 'kept': event \d+ \(subagent_spawned\).*name",
        ),
        (
            "crash",
            lambda kind, data: {"content": ["a"]} if kind == "steered" else None,
            r"event \d+ \(steered\).*content",
        ),
        (
            "fan",
            lambda kind, data: {"tool_call_id": ["x"]} if kind == "tool_call" else None,
            r"event \d+ \(tool_call\).*tool_call_id",
        ),
    ],
)
def test_an_event_missing_what_restore_reads_is_a_serialization_error_naming_it(
    stored: tuple[Path, list[str]], tmp_path: Path, session_id: str, change: Any, match: str
) -> None:
    base, _ = stored
    path = _with_event(tmp_path, base, session_id, change)
    with SQLiteStore(path) as store, Runtime() as runtime:
        with pytest.raises(SerializationError, match=match):
            runtime.restore(session_id, store=store, agents=_agents())
        assert runtime.live_agents() == 0


def test_what_log_event_accepts_can_be_restored() -> None:
    ctx = AgentContext("a")
    with pytest.raises(ActorsError, match="child_id"):
        ctx.log_event("subagent_spawned", {"name": "helper"})
    with pytest.raises(ActorsError, match="kept child"):
        ctx.log_event("subagent_spawned", {"child_id": "a-sub-1", "keep": True})
    ctx.log_event("subagent_spawned", {"child_id": "a-sub-1", "name": "helper", "keep": True})
    assert AgentContext.deserialize(ctx.serialize()).events == ctx.events
