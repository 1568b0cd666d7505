"""Session ownership between real processes, for every durable store."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from actors.store import PostgresStore, SessionStore, SQLiteStore
from actors.store._pg_sql import lock_key

from .crash_child import BATCH, event

CHILD = Path(__file__).with_name("store_child.py")


@dataclass(frozen=True)
class Target:
    """A store the parent and its children open: the children's spec, and how to open it here."""

    spec: str
    env: dict[str, str]
    dsn: str = ""

    def open(self) -> SessionStore:
        kind, _, where = self.spec.partition(":")
        if kind == "sqlite":
            return SQLiteStore(where)
        return PostgresStore(self.dsn, schema=where)


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    if request.param == "sqlite":
        return Target(f"sqlite:{tmp_path / 'sessions.db'}", {})
    dsn: str = request.getfixturevalue("postgres_dsn")
    schema = f"p_{secrets.token_hex(6)}"
    PostgresStore(dsn, schema=schema).close()  # the schema exists before the children race
    return Target(f"postgres:{schema}", {"ACTORS_CHILD_POSTGRES_DSN": dsn}, dsn)


class Child:
    """A store_child.py process, spoken to line by line."""

    def __init__(self, target: Target, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(CHILD), target.spec, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **target.env},
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def line(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            assert self.process.stderr is not None
            pytest.fail(f"child {self.pid} ended early: {self.process.stderr.read()[-2000:]}")
        return line.rstrip("\n")

    def send(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text + "\n")
        self.process.stdin.flush()

    def finish(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(timeout=30)

    def kill(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def close(self) -> None:
        if self.process.poll() is None:
            self.kill()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def children() -> Iterator[list[Child]]:
    started: list[Child] = []
    yield started
    for child in started:
        child.close()


def wait_until_the_server_lets_go(target: Target, session_id: str) -> None:
    """Block until the server has dropped a dead holder's lock (it sees the connection close).

    This waits on the lock itself, not on a clock: the server grants it once the killed
    process's connection is gone.
    """
    if not target.dsn:
        return
    import psycopg

    key = lock_key(target.spec.partition(":")[2], session_id)
    with psycopg.connect(target.dsn, autocommit=True) as conn:
        conn.execute("SET lock_timeout = '20s'")
        conn.execute("SELECT pg_advisory_lock(%s)", (key,))
        conn.execute("SELECT pg_advisory_unlock(%s)", (key,))


def test_one_of_two_racing_processes_wins(target: Target, children: list[Child]) -> None:
    first, second = Child(target, "hold", "race"), Child(target, "hold", "race")
    children += [first, second]
    assert (first.line(), second.line()) == ("ready", "ready")
    first.send("go")
    second.send("go")
    outcomes = {first: first.line(), second: second.line()}
    [winner] = [child for child, said in outcomes.items() if said == "won"]
    [loser] = [child for child, said in outcomes.items() if said != "won"]
    assert outcomes[loser] == f"busy {socket.gethostname()} {winner.pid}"
    assert winner.line() == "wrote"
    loser.send("append")
    assert loser.line() == "refused"
    assert loser.finish() == 0
    with target.open() as store:
        assert store.last_seq("race", "root") == BATCH - 1  # the loser wrote nothing
        events = store.load("race").agents[0].context["events"]
        assert events == [event(seq).model_dump(mode="json") for seq in range(BATCH)]
    assert winner.finish() == 0


def test_a_killed_holder_frees_its_session(target: Target, children: list[Child]) -> None:
    holder = Child(target, "hold", "s1")
    children.append(holder)
    assert holder.line() == "ready"
    holder.send("go")
    assert (holder.line(), holder.line()) == ("won", "wrote")
    with target.open() as store:
        assert store.list_sessions()[0].event_count == BATCH
    holder.kill()
    wait_until_the_server_lets_go(target, "s1")
    heir = Child(target, "hold", "s1")
    children.append(heir)
    assert heir.line() == "ready"
    heir.send("go")
    assert (heir.line(), heir.line()) == ("won", "wrote")
    with target.open() as store:
        assert store.last_seq("s1", "root") == BATCH - 1  # the heir's re-append was skipped
    assert heir.finish() == 0


def test_two_processes_write_their_own_sessions_at_once(
    target: Target, children: list[Child]
) -> None:
    batches = 40
    writers = [Child(target, "write", session_id, str(batches)) for session_id in ("a", "b")]
    children += writers
    assert [writer.line() for writer in writers] == ["ready", "ready"]
    for writer in writers:
        writer.send("go")
    assert [writer.line() for writer in writers] == ["done", "done"]
    assert [writer.finish() for writer in writers] == [0, 0]
    with target.open() as store:
        for session_id in ("a", "b"):
            events = store.load(session_id).agents[0].context["events"]
            expected = [event(seq).model_dump(mode="json") for seq in range(batches * BATCH)]
            assert events == expected
