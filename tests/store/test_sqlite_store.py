from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from actors import AgentContext, UserMessage
from actors.exceptions import (
    CorruptStoreError,
    SchemaVersionError,
    SessionBusyError,
    StoreError,
    UserError,
)
from actors.store import AgentRecord, SessionStore, SQLiteStore, _owner, _schema
from actors.store.conformance import StoreConformance, sample_context, screenshot

from .crash_child import BATCH, event

CHILD = Path(__file__).with_name("crash_child.py")


def _raw(store: SessionStore, query: str) -> list[tuple[Any, ...]]:
    assert isinstance(store, SQLiteStore)
    with sqlite3.connect(store.path) as conn:
        return conn.execute(query).fetchall()


class TestSQLiteStore(StoreConformance):
    def make_store(self, tmp_path: Path) -> SessionStore:
        return SQLiteStore(tmp_path / "sessions.db")

    def make_peer(self, store: SessionStore, tmp_path: Path) -> SessionStore:
        return SQLiteStore(tmp_path / "sessions.db")

    def stored_payloads(self, store: SessionStore) -> list[str] | None:
        query = "SELECT data FROM events UNION ALL SELECT data FROM snapshots"
        return [row[0] for row in _raw(store, query)]

    def stored_blob_count(self, store: SessionStore) -> int | None:
        return int(_raw(store, "SELECT COUNT(*) FROM blobs")[0][0])


class TestSQLiteStoreSync(StoreConformance):
    def make_store(self, tmp_path: Path) -> SessionStore:
        return SQLiteStore(tmp_path / "sessions.db", durability="sync")

    def make_peer(self, store: SessionStore, tmp_path: Path) -> SessionStore:
        return SQLiteStore(tmp_path / "sessions.db", durability="sync")


# -- helpers ------------------------------------------------------------------------------------


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "sessions.db"


def fill(path: Path, events: int = 300) -> None:
    """A closed store file holding one session whose root has ``events`` events."""
    with SQLiteStore(path) as store:
        store.create_session("s1", root_agent_id="root")
        store.put_agent("s1", AgentRecord("root", None, "spec", "idle"))
        store.append_events("s1", "root", [event(seq) for seq in range(events)])


def raw(path: Path) -> closing[sqlite3.Connection]:
    return closing(sqlite3.connect(path, isolation_level=None))


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_refused_untouched(path: Path, error: type[StoreError], match: str) -> None:
    """Opening ``path`` raises ``error`` naming the file, and the file is left as it was."""
    before = digest(path)
    with pytest.raises(error, match=match) as caught:
        SQLiteStore(path)
    assert str(path) in str(caught.value)
    assert digest(path) == before
    assert not Path(f"{path}-wal").exists()


# -- the file -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("durability", "synchronous"), [("batch", 1), ("sync", 2)])
def test_wal_mode_and_durability(path: Path, durability: str, synchronous: int) -> None:
    with SQLiteStore(path, durability=durability) as store:  # type: ignore[arg-type]
        assert store.durability == durability
        assert store._conn is not None
        assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == synchronous
        with raw(path) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_schema_version_is_recorded(path: Path) -> None:
    SQLiteStore(path).close()
    with raw(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == _schema.SCHEMA_VERSION == 7
        assert conn.execute("PRAGMA application_id").fetchone()[0] == _schema.APPLICATION_ID


def test_reopen_after_close_keeps_everything(path: Path) -> None:
    ctx = sample_context("root")
    with SQLiteStore(path, durability="sync") as store:
        store.create_session("s1", root_agent_id="root", data={"spec": "assistant"})
        store.put_agent("s1", AgentRecord("root", None, ctx.name, "suspended"))
        store.append_events("s1", "root", ctx.events)
        before, listed = store.load("s1"), store.list_sessions()
    with SQLiteStore(path) as store:
        assert store.load("s1") == before
        assert store.list_sessions() == listed
        restored = AgentContext.deserialize(store.load("s1").agents[0].context)
        assert restored.suspended == ctx.suspended
        assert store.last_seq("s1", "root") == len(ctx.events) - 1


def test_two_stores_share_one_file(path: Path) -> None:
    with SQLiteStore(path) as writer, SQLiteStore(path) as reader:
        writer.create_session("s1", root_agent_id="root")
        writer.put_agent("s1", AgentRecord("root", None, "spec", "idle"))
        writer.append_events("s1", "root", [event(0), event(1)])
        assert reader.last_seq("s1", "root") == 1
        reader.append_events("s1", "root", [event(1), event(2)])
        assert writer.last_seq("s1", "root") == 2


def test_an_empty_file_becomes_a_store(path: Path) -> None:
    path.touch()
    with SQLiteStore(path) as store:
        assert store.list_sessions() == []


def test_a_version_0_database_is_migrated(path: Path) -> None:
    with raw(path) as conn:  # a real SQLite file, but no tables and user_version 0
        conn.execute("CREATE TABLE scratch (x)")
        conn.execute("DROP TABLE scratch")
    assert path.stat().st_size > 0
    with SQLiteStore(path) as store:
        store.create_session("s1", root_agent_id="root")
    with raw(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == _schema.SCHEMA_VERSION


def test_an_older_schema_is_migrated_once(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fill(path, events=5)
    calls: list[int] = []

    def add_labels(conn: sqlite3.Connection) -> None:
        calls.append(1)
        conn.execute("CREATE TABLE labels (session_id TEXT PRIMARY KEY, label TEXT)")

    current = _schema.SCHEMA_VERSION
    monkeypatch.setattr(_schema, "MIGRATIONS", [*_schema.MIGRATIONS, add_labels])
    monkeypatch.setattr(_schema, "SCHEMA_VERSION", current + 1)
    with SQLiteStore(path) as store:
        assert store.last_seq("s1", "root") == 4
    SQLiteStore(path).close()
    assert calls == [1]
    with raw(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == current + 1
        assert conn.execute("SELECT COUNT(*) FROM labels").fetchone()[0] == 0


def test_a_failed_migration_leaves_the_old_schema(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(path, events=5)

    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE labels (x)")
        conn.execute("INSERT INTO no_such_table VALUES (1)")

    current = _schema.SCHEMA_VERSION
    with monkeypatch.context() as patch:
        patch.setattr(_schema, "MIGRATIONS", [*_schema.MIGRATIONS, broken])
        patch.setattr(_schema, "SCHEMA_VERSION", current + 1)
        with pytest.raises(StoreError, match=str(path)):
            SQLiteStore(path)
    with raw(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == current
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        assert "labels" not in tables
    with SQLiteStore(path) as store:
        assert store.last_seq("s1", "root") == 4


def test_a_version_1_file_gains_the_owners_table(path: Path) -> None:
    with raw(path) as conn:  # what the previous release wrote: migration 1 only
        conn.execute("BEGIN IMMEDIATE")
        _schema.MIGRATIONS[0](conn)
        conn.execute("PRAGMA user_version = 1")
        conn.execute("COMMIT")
        now = "2025-01-01T00:00:00+00:00"
        conn.execute("INSERT INTO sessions VALUES ('s1', 'root', '{}', ?, ?, 0)", (now, now))
    with SQLiteStore(path) as store:
        store.acquire("s1")
        assert store.load("s1").root_agent_id == "root"
    with raw(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == _schema.SCHEMA_VERSION
        assert conn.execute("SELECT COUNT(*) FROM owners").fetchone()[0] == 0  # released


def test_a_version_2_file_gains_the_snapshots_table_and_keeps_its_logs(path: Path) -> None:
    with raw(path) as conn:  # what the previous release wrote: migrations 1 and 2
        conn.execute("BEGIN IMMEDIATE")
        _schema.MIGRATIONS[0](conn)
        _schema.MIGRATIONS[1](conn)
        conn.execute("PRAGMA user_version = 2")
        conn.execute("COMMIT")
    ctx = sample_context("root")
    fill_old = [(e.seq, e.type, e.data) for e in ctx.events]
    with raw(path) as conn:
        now = "2025-01-01T00:00:00+00:00"
        conn.execute("INSERT INTO sessions VALUES ('s1', 'root', '{}', ?, ?, 0)", (now, now))
        conn.execute("INSERT INTO agents VALUES ('s1', 'root', NULL, 'root', 'idle', 0)")
        for seq, kind, data in fill_old:
            conn.execute(
                "INSERT INTO events VALUES ('s1', 'root', ?, ?, ?, ?)",
                (seq, kind, json.dumps(data), "2025-01-01T00:00:00Z"),
            )
    with SQLiteStore(path) as store:
        loaded = store.load("s1", snapshots=True).agent("root")
        assert (loaded.snapshot, len(loaded.context["events"])) == (None, len(fill_old))
        store.put_snapshot("s1", "root", {"seq": 1})
        assert store.load("s1", snapshots=True).agent("root").first_seq == 1
    with raw(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == _schema.SCHEMA_VERSION


def test_a_newer_schema_is_refused(path: Path) -> None:
    fill(path, events=5)
    with raw(path) as conn:
        conn.execute("PRAGMA user_version = 99")
    assert_refused_untouched(path, SchemaVersionError, "version 99.*upgrade actors")


def test_random_bytes_are_refused(path: Path) -> None:
    path.write_bytes(random.Random(7).randbytes(8192))
    assert_refused_untouched(path, CorruptStoreError, "not an SQLite database")


def test_garbage_behind_an_sqlite_header_is_refused(path: Path) -> None:
    fill(path)
    data = bytearray(path.read_bytes())
    data[100:] = random.Random(7).randbytes(len(data) - 100)
    path.write_bytes(bytes(data))
    assert_refused_untouched(path, CorruptStoreError, "damaged")


def test_a_damaged_page_is_refused(path: Path) -> None:
    fill(path)
    data = bytearray(path.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    last_page = len(data) - page_size  # a b-tree page of the events table
    data[last_page : last_page + 64] = b"\xff" * 64
    path.write_bytes(bytes(data))
    assert_refused_untouched(path, CorruptStoreError, "damaged")


def test_a_file_truncated_mid_page_is_refused(path: Path) -> None:
    fill(path)
    size = path.stat().st_size
    with path.open("r+b") as file:
        file.truncate(size // 2 + 100)
    assert_refused_untouched(path, CorruptStoreError, "truncated")


def test_a_file_truncated_at_a_page_boundary_is_refused(path: Path) -> None:
    fill(path)
    page_size = int.from_bytes(path.read_bytes()[16:18], "big")
    with path.open("r+b") as file:
        file.truncate(page_size * 2)
    assert_refused_untouched(path, CorruptStoreError, "truncated")


def test_a_file_shorter_than_a_header_is_refused(path: Path) -> None:
    path.write_bytes(b"SQLite format 3\x00")
    assert_refused_untouched(path, CorruptStoreError, "not an SQLite database")


def test_another_applications_database_is_refused(path: Path) -> None:
    with raw(path) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
    assert_refused_untouched(path, CorruptStoreError, "not a session store")


def test_a_damaged_payload_is_reported_on_load(path: Path) -> None:
    fill(path, events=3)
    with raw(path) as conn:
        conn.execute("UPDATE events SET data = '{\"seq\": 1,' WHERE seq = 1")
    store = SQLiteStore(path)
    with store, pytest.raises(CorruptStoreError, match=f"{path}.*agent 'root' of session 's1'"):
        store.load("s1")


def test_a_locked_file_is_an_error_that_writes_nothing(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(path, events=3)
    monkeypatch.setattr(_schema, "_BUSY_TIMEOUT", 0.05)
    with SQLiteStore(path) as store, raw(path) as other:
        other.execute("BEGIN IMMEDIATE")  # another writer holds the lock
        with pytest.raises(StoreError, match="lock"):
            store.append_events("s1", "root", [event(3)])
        other.execute("ROLLBACK")
        assert store.last_seq("s1", "root") == 2
        store.append_events("s1", "root", [event(3)])
        assert store.last_seq("s1", "root") == 3


def test_bad_paths_and_arguments(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="is a directory"):
        SQLiteStore(tmp_path)
    with pytest.raises(StoreError, match="directory exists"):
        SQLiteStore(tmp_path / "missing" / "sessions.db")
    with pytest.raises(UserError, match="durability"):
        SQLiteStore(tmp_path / "s.db", durability="fast")  # type: ignore[arg-type]
    assert not (tmp_path / "s.db").exists()


def test_errors_name_the_file(path: Path) -> None:
    with SQLiteStore(path) as store:
        with pytest.raises(StoreError, match=str(path)):
            store.load("nope")
        assert repr(store) == f"<SQLiteStore {str(path)!r} durability='batch'>"
    with pytest.raises(StoreError, match=f"{path}.*closed"):
        store.list_sessions()


# -- a real crash -------------------------------------------------------------------------------


def run_and_kill(path: Path, durability: str, first_batch: int, reports: int) -> int:
    """Start a child appending from ``first_batch``; SIGKILL it after ``reports`` commits.

    Returns the last batch the child reported as committed.
    """
    command = [sys.executable, str(CHILD), str(path), durability, str(first_batch)]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as child:
        assert child.stdout is not None
        assert child.stderr is not None
        try:
            assert child.stdout.readline() == "ready\n", child.stderr.read()
            last = first_batch - 1
            for _ in range(reports):
                line = child.stdout.readline()
                assert line, f"the child died early: {child.stderr.read()}"
                last = int(line)
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
    assert child.returncode == -signal.SIGKILL
    return last


@pytest.mark.parametrize(("durability", "seed"), [("batch", 1), ("sync", 2)])
def test_sigkill_loses_nothing_committed(path: Path, durability: str, seed: int) -> None:
    rng = random.Random(seed)
    first = 0
    for _round in range(2):
        reported = run_and_kill(path, durability, first, reports=rng.randint(1, 40))
        with SQLiteStore(path) as store:
            last_seq = store.last_seq("crash", "root")
            stored = store.load("crash").agents[0].context["events"]
        # Everything reported is there; batches are whole; every event is the one written.
        assert last_seq >= (reported + 1) * BATCH - 1
        assert (last_seq + 1) % BATCH == 0
        assert stored == [event(seq).model_dump(mode="json") for seq in range(last_seq + 1)]
        # The next run restarts at the last reported batch: re-appending it must be harmless.
        first = reported


# -- who holds a session --------------------------------------------------------------------------


def forge_holder(path: Path, host: str, pid: int, started: str) -> None:
    """Record a holder of session s1 as another process would have."""
    fill(path, events=1)
    with raw(path) as conn:
        conn.execute(
            "INSERT INTO owners VALUES ('s1', ?, ?, ?, 'another-store', '2025-01-01T00:00:00')",
            (host, pid, started),
        )


def test_a_holder_whose_process_ended_holds_nothing(path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "import os; print(os.getpid())"])
    dead.wait()
    forge_holder(path, socket.gethostname(), dead.pid, "boot:1")
    with SQLiteStore(path) as store:
        store.append_events("s1", "root", [event(1)])
        store.acquire("s1")


def test_a_reused_pid_is_not_the_holder(path: Path) -> None:
    # pid 1 runs, but it is not the process that started at the recorded moment.
    forge_holder(path, socket.gethostname(), 1, "another-boot:42")
    with SQLiteStore(path) as store:
        store.acquire("s1")


def test_a_live_holder_in_another_process_keeps_the_session(path: Path) -> None:
    started = _owner.process_start(1)
    assert started is not None
    forge_holder(path, socket.gethostname(), 1, started)
    with SQLiteStore(path) as store:
        with pytest.raises(SessionBusyError, match="process 1 on host"):
            store.append_events("s1", "root", [event(1)])
        assert store.last_seq("s1", "root") == 0


def test_a_holder_on_another_host_is_taken_as_alive(path: Path) -> None:
    forge_holder(path, "elsewhere.invalid", 4242, "")
    with SQLiteStore(path) as store, pytest.raises(SessionBusyError) as caught:
        store.acquire("s1")
    assert (caught.value.holder_host, caught.value.holder_pid) == ("elsewhere.invalid", 4242)


def test_a_version_3_file_gains_the_forks_table_and_forks(path: Path) -> None:
    with raw(path) as conn:  # what the previous release wrote: migrations 1 to 3
        conn.execute("BEGIN IMMEDIATE")
        for migration in _schema.MIGRATIONS[:3]:
            migration(conn)
        conn.execute("PRAGMA user_version = 3")
        conn.execute("COMMIT")
        now = "2025-01-01T00:00:00+00:00"
        conn.execute("INSERT INTO sessions VALUES ('s1', 'root', '{}', ?, ?, 2)", (now, now))
        conn.execute("INSERT INTO agents VALUES ('s1', 'root', NULL, 'root', 'idle', 0)")
        for seq in range(2):
            conn.execute(
                "INSERT INTO events VALUES ('s1', 'root', ?, 'app.step', '{}', ?)",
                (seq, "2025-01-01T00:00:00Z"),
            )
    with SQLiteStore(path) as store:
        store.fork("s1", "f1", at=0, root_agent_id="f")
        assert [e["seq"] for e in store.read_events("f1", "f")] == [0]
    with raw(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == _schema.SCHEMA_VERSION
        assert conn.execute("SELECT COUNT(*) FROM forks").fetchone()[0] == 1
        # Shared by reference: the fork's event is the original's row, not a copy.
        assert conn.execute("SELECT COUNT(*) FROM events").fetchone()[0] == 2


def test_a_version_4_file_gains_blobs_and_reads_its_logs_unchanged(path: Path) -> None:
    with raw(path) as conn:  # what the previous release wrote: migrations 1 to 4
        conn.execute("BEGIN IMMEDIATE")
        for migration in _schema.MIGRATIONS[:4]:
            migration(conn)
        conn.execute("PRAGMA user_version = 4")
        conn.execute("COMMIT")
        now = "2025-01-01T00:00:00+00:00"
        conn.execute("INSERT INTO sessions VALUES ('s1', 'root', '{}', ?, ?, 1)", (now, now))
        conn.execute("INSERT INTO agents VALUES ('s1', 'root', NULL, 'root', 'idle', 0)")
        old = json.dumps({"role": "user", "content": "hi"})
        conn.execute(
            "INSERT INTO events VALUES ('s1', 'root', 0, 'user_message', ?, ?)",
            (old, "2025-01-01T00:00:00Z"),
        )
    ctx = AgentContext("root")
    ctx.add_message(UserMessage(content="hi"))
    ctx.add_message(UserMessage(content=["and this", screenshot(1)]))
    with SQLiteStore(path) as store:
        assert store.read_events("s1", "root")[0]["data"] == json.loads(old)
        store.append_events("s1", "root", ctx.events[1:])
        assert store.read_events("s1", "root")[1]["data"] == ctx.events[1].data
    with raw(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == _schema.SCHEMA_VERSION
        assert conn.execute("SELECT COUNT(*) FROM blobs").fetchone()[0] == 1


def test_a_missing_blob_is_a_damaged_file(path: Path) -> None:
    ctx = AgentContext("root")
    ctx.add_message(UserMessage(content=["look", screenshot(1)]))
    with SQLiteStore(path) as store:
        store.create_session("s1", root_agent_id="root")
        store.put_agent("s1", AgentRecord("root", None, "spec", "idle"))
        store.append_events("s1", "root", ctx.events)
    with raw(path) as conn:
        conn.execute("DELETE FROM blobs")
    with SQLiteStore(path) as store, pytest.raises(CorruptStoreError, match="blob"):
        store.load("s1")
