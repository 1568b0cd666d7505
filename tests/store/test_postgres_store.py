from __future__ import annotations

import logging
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

import psycopg
import psycopg.conninfo
import pytest
import structlog

from actors import AgentContext, UserMessage
from actors.exceptions import (
    CorruptStoreError,
    DatabaseNotFoundError,
    FencedWriteError,
    SchemaVersionError,
    SessionBusyError,
    StoreAuthenticationError,
    StoreConnectionError,
    StoreError,
    UserError,
)
from actors.store import AgentRecord, PostgresStore, SessionStore, _pg_sql
from actors.store.conformance import StoreConformance, sample_context, screenshot

from .crash_child import BATCH, event
from .tcp_proxy import Proxy

CHILD = Path(__file__).with_name("store_child.py")


class TestPostgresStore(StoreConformance):
    @pytest.fixture(autouse=True)
    def _database(self, postgres_dsn: str) -> None:
        self.dsn = postgres_dsn

    def make_store(self, tmp_path: Path) -> SessionStore:
        return PostgresStore(self.dsn, schema=f"t_{secrets.token_hex(6)}")

    def make_peer(self, store: SessionStore, tmp_path: Path) -> SessionStore:
        assert isinstance(store, PostgresStore)
        return PostgresStore(self.dsn, schema=store.schema)

    def _raw(self, store: SessionStore, query: str) -> list[tuple[object, ...]]:
        assert isinstance(store, PostgresStore)
        with admin(self.dsn) as conn:
            return conn.execute(query.replace("{s}", f'"{store.schema}"')).fetchall()

    def stored_payloads(self, store: SessionStore) -> list[str] | None:
        query = "SELECT data FROM {s}.events UNION ALL SELECT data FROM {s}.snapshots"
        return [str(row[0]) for row in self._raw(store, query)]

    def stored_blob_count(self, store: SessionStore) -> int | None:
        return int(str(self._raw(store, "SELECT COUNT(*) FROM {s}.blobs")[0][0]))


# -- helpers ------------------------------------------------------------------------------------


@pytest.fixture
def schema() -> str:
    return f"t_{secrets.token_hex(6)}"


@pytest.fixture
def store(postgres_dsn: str, schema: str) -> Iterator[PostgresStore]:
    with PostgresStore(postgres_dsn, schema=schema) as store:
        yield store


def admin(dsn: str) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(dsn, autocommit=True)


def params(dsn: str) -> dict[str, str]:
    return {key: str(value) for key, value in psycopg.conninfo.conninfo_to_dict(dsn).items()}


def password_of(dsn: str) -> str:
    password = params(dsn).get("password") or os.environ.get("PGPASSWORD", "")
    assert len(password) >= 8, "the test server must use a real password"
    return password


def fill(store: SessionStore, session_id: str = "s1", events: int = 5) -> None:
    store.create_session(session_id, root_agent_id="root")
    store.put_agent(session_id, AgentRecord("root", None, "spec", "idle"))
    store.append_events(session_id, "root", [event(seq) for seq in range(events)])


def assert_secret_kept(secret: str, error: BaseException, *texts: str) -> None:
    """``secret`` is in no message, repr or traceback of ``error``, nor in ``texts``."""
    rendered = "".join(traceback.format_exception(error))
    seen = [str(error), repr(error), rendered, *texts]
    cause = error.__cause__ or error.__context__
    while cause is not None:
        seen += [str(cause), repr(cause), repr(vars(cause)) if hasattr(cause, "__dict__") else ""]
        cause = cause.__cause__ or cause.__context__
    assert all(secret not in text for text in seen)


# -- the database -------------------------------------------------------------------------------


def test_tables_live_in_the_schema_with_its_version(postgres_dsn: str, schema: str) -> None:
    PostgresStore(postgres_dsn, schema=schema).close()
    with admin(postgres_dsn) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (schema,),
        ).fetchall()
        (version,) = conn.execute(f'SELECT version FROM "{schema}".schema_version').fetchone()
    assert {t for (t,) in tables} == {
        "sessions",
        "agents",
        "events",
        "owners",
        "snapshots",
        "forks",
        "budgets",
        "budget_holds",
        "blobs",
        "blob_refs",
        "fences",
        "schema_version",
    }
    assert version == _pg_sql.SCHEMA_VERSION == 6


def test_reopen_keeps_everything(postgres_dsn: str, schema: str) -> None:
    ctx = sample_context("root")
    with PostgresStore(postgres_dsn, schema=schema) as store:
        store.create_session("s1", root_agent_id="root", data={"spec": "assistant"})
        store.put_agent("s1", AgentRecord("root", None, ctx.name, "suspended"))
        store.append_events("s1", "root", ctx.events)
        before, listed = store.load("s1"), store.list_sessions()
    with PostgresStore(postgres_dsn, schema=schema) as store:
        assert store.load("s1") == before
        assert store.list_sessions() == listed
        restored = AgentContext.deserialize(store.load("s1").agents[0].context)
        assert restored.suspended == ctx.suspended


def test_a_schema_name_is_quoted_not_trusted(postgres_dsn: str) -> None:
    odd = f'Odd "name"; DROP {secrets.token_hex(3)}'
    with PostgresStore(postgres_dsn, schema=odd) as store:
        fill(store)
        assert store.last_seq("s1", "root") == 4
    with pytest.raises(UserError, match="schema"):
        PostgresStore(postgres_dsn, schema="")
    with pytest.raises(UserError, match="63 bytes"):
        PostgresStore(postgres_dsn, schema="x" * 64)


def test_a_newer_schema_is_refused_untouched(postgres_dsn: str, schema: str) -> None:
    with PostgresStore(postgres_dsn, schema=schema) as store:
        fill(store)
    with admin(postgres_dsn) as conn:
        conn.execute(f'UPDATE "{schema}".schema_version SET version = 99')
    with pytest.raises(SchemaVersionError, match=r"version 99.*upgrade actors") as caught:
        PostgresStore(postgres_dsn, schema=schema)
    assert schema in str(caught.value)
    with admin(postgres_dsn) as conn:
        assert conn.execute(f'SELECT version FROM "{schema}".schema_version').fetchone() == (99,)


def test_another_applications_schema_is_refused(postgres_dsn: str, schema: str) -> None:
    with admin(postgres_dsn) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'CREATE TABLE "{schema}".users (name text)')
    with pytest.raises(CorruptStoreError, match=r"not a session store.*users"):
        PostgresStore(postgres_dsn, schema=schema)


def test_an_older_schema_is_migrated_once(
    postgres_dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with PostgresStore(postgres_dsn, schema=schema) as store:
        fill(store)
    real = _pg_sql.migrations

    def with_labels(name: str) -> list[list[str]]:
        return [*real(name), [f'CREATE TABLE "{name}".labels (session_id text PRIMARY KEY)']]

    monkeypatch.setattr(_pg_sql, "migrations", with_labels)
    with (
        PostgresStore(postgres_dsn, schema=schema) as first,
        PostgresStore(postgres_dsn, schema=schema) as second,
    ):
        assert first.last_seq("s1", "root") == second.last_seq("s1", "root") == 4
    with admin(postgres_dsn) as conn:
        assert conn.execute(f'SELECT version FROM "{schema}".schema_version').fetchone() == (
            _pg_sql.SCHEMA_VERSION + 1,
        )
        assert conn.execute(f'SELECT COUNT(*) FROM "{schema}".labels').fetchone() == (0,)


def test_a_version_1_schema_gains_snapshots_and_keeps_its_logs(
    postgres_dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = _pg_sql.migrations
    with monkeypatch.context() as patch:  # what the previous release wrote: version 1
        patch.setattr(_pg_sql, "migrations", lambda name: real(name)[:1])
        patch.setattr(PostgresStore, "_check_fence", lambda *args: None)  # it had none
        with PostgresStore(postgres_dsn, schema=schema) as store:
            fill(store)
    with admin(postgres_dsn) as conn:
        assert conn.execute(f'SELECT version FROM "{schema}".schema_version').fetchone() == (1,)
    with PostgresStore(postgres_dsn, schema=schema) as store:
        assert store.load("s1", snapshots=True).agent("root").snapshot is None
        store.put_snapshot("s1", "root", {"seq": 3})
        loaded = store.load("s1", snapshots=True).agent("root")
        assert [e["seq"] for e in loaded.context["events"]] == [3, 4]
    with admin(postgres_dsn) as conn:
        assert conn.execute(f'SELECT version FROM "{schema}".schema_version').fetchone() == (
            _pg_sql.SCHEMA_VERSION,
        )


def test_a_version_2_schema_gains_forks_and_its_append_follows_them(
    postgres_dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = _pg_sql.migrations
    with monkeypatch.context() as patch:  # what the previous release wrote: version 2
        patch.setattr(_pg_sql, "migrations", lambda name: real(name)[:2])
        patch.setattr(PostgresStore, "_check_fence", lambda *args: None)  # it had none
        with PostgresStore(postgres_dsn, schema=schema) as store:
            fill(store)
    with PostgresStore(postgres_dsn, schema=schema) as store:
        store.fork("s1", "f1", at=2, root_agent_id="f")
        # The one-round-trip append knows the fork's log goes on after its prefix.
        store.append_events("f1", "f", [event(3)])
        assert [e["seq"] for e in store.read_events("f1", "f")] == [0, 1, 2, 3]
    with admin(postgres_dsn) as conn:
        assert conn.execute(f'SELECT version FROM "{schema}".schema_version').fetchone() == (
            _pg_sql.SCHEMA_VERSION,
        )
        shared = conn.execute(f'SELECT COUNT(*) FROM "{schema}".events').fetchone()
        assert shared == (6,)  # five of the original, one of the fork: no copy


def test_a_version_3_schema_gains_fences_and_its_append_heeds_them(
    postgres_dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = _pg_sql.migrations
    with monkeypatch.context() as patch:  # what the previous release wrote: version 3
        patch.setattr(_pg_sql, "migrations", lambda name: real(name)[:3])
        patch.setattr(PostgresStore, "_check_fence", lambda *args: None)  # it had none
        with PostgresStore(postgres_dsn, schema=schema) as store:
            fill(store)
    with (
        PostgresStore(postgres_dsn, schema=schema) as old,
        PostgresStore(postgres_dsn, schema=schema) as new,
    ):
        assert new.fence("s1") == 1
        # The one-round-trip append (the migrated function) refuses the instance fenced out.
        with pytest.raises(FencedWriteError):
            old.append_events("s1", "root", [event(5)])
        new.append_events("s1", "root", [event(5)])
        assert old.last_seq("s1", "root") == 5


def test_a_failed_migration_leaves_the_old_schema(
    postgres_dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with PostgresStore(postgres_dsn, schema=schema) as store:
        fill(store)
    real = _pg_sql.migrations

    def broken(name: str) -> list[list[str]]:
        return [*real(name), [f'CREATE TABLE "{name}".labels (x int)', "SELECT * FROM nowhere"]]

    with monkeypatch.context() as patch:
        patch.setattr(_pg_sql, "migrations", broken)
        with pytest.raises(StoreError, match="nowhere"):
            PostgresStore(postgres_dsn, schema=schema)
    with admin(postgres_dsn) as conn:
        assert conn.execute(f'SELECT version FROM "{schema}".schema_version').fetchone() == (
            _pg_sql.SCHEMA_VERSION,
        )
        labels = conn.execute("SELECT to_regclass(%s)", (f'"{schema}".labels',)).fetchone()
        assert labels == (None,)
    with PostgresStore(postgres_dsn, schema=schema) as store:
        assert store.last_seq("s1", "root") == 4


def test_commits_wait_for_the_disk(postgres_dsn: str, schema: str) -> None:
    """synchronous_commit is on for the store's connections, even when the server says off."""
    database = params(postgres_dsn)["dbname"]
    with admin(postgres_dsn) as conn:
        conn.execute(f"ALTER DATABASE {database} SET synchronous_commit = off")
    try:
        with PostgresStore(postgres_dsn, schema=schema) as store:
            link = store._link
            assert link is not None
            setting = link.run("reading", lambda c: c.execute("SHOW synchronous_commit").fetchone())
        assert setting == ("on",)
    finally:
        with admin(postgres_dsn) as conn:
            conn.execute(f"ALTER DATABASE {database} RESET synchronous_commit")


# -- what the user sees -------------------------------------------------------------------------


def test_repr_and_url_show_where_never_the_password(
    postgres_dsn: str, store: PostgresStore
) -> None:
    given = params(postgres_dsn)
    where = f"postgresql://{given['user']}@{given['host']}:{given['port']}/{given['dbname']}"
    assert store.url == where
    assert repr(store) == f"<PostgresStore {where} schema={store.schema!r}>"
    store.close()
    assert repr(store).endswith("closed>")
    assert password_of(postgres_dsn) not in repr(store)


def test_a_refused_password_never_shows(
    postgres_dsn: str, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = f"wrong-{secrets.token_hex(8)}"
    dsn = psycopg.conninfo.make_conninfo(postgres_dsn, password=wrong)
    caplog.set_level(logging.DEBUG)
    with (
        structlog.testing.capture_logs() as logs,
        pytest.raises(StoreAuthenticationError) as caught,
    ):
        PostgresStore(dsn, connect_timeout=5)
    error = caught.value
    user, dbname = params(postgres_dsn)["user"], params(postgres_dsn)["dbname"]
    assert f"refused user {user!r} for database {dbname!r}" in str(error)
    assert "password" in str(error)  # says what to check
    out, err = capsys.readouterr()
    assert_secret_kept(wrong, error, caplog.text, repr(logs), out, err)
    assert_secret_kept(password_of(postgres_dsn), error, caplog.text)


def test_a_missing_database_is_named(postgres_dsn: str) -> None:
    missing = f"nope_{secrets.token_hex(4)}"
    dsn = psycopg.conninfo.make_conninfo(postgres_dsn, dbname=missing)
    expected = f"database '{missing}' does not exist"
    with pytest.raises(DatabaseNotFoundError, match=expected) as caught:
        PostgresStore(dsn)
    assert "createdb" in str(caught.value)
    assert_secret_kept(password_of(postgres_dsn), caught.value)


def test_an_unreachable_server_is_a_connection_error() -> None:
    with socket.socket() as probe:  # a free port, with nothing listening on it
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    secret = f"s3cret-{secrets.token_hex(6)}"
    with pytest.raises(StoreConnectionError, match=f"127.0.0.1:{port}.*server runs") as caught:
        PostgresStore(f"postgresql://someone:{secret}@127.0.0.1:{port}/db", connect_timeout=2)
    assert_secret_kept(secret, caught.value)


@pytest.mark.parametrize(
    "dsn",
    ["postgresql://user:hunter2-secret@[::1", "host=localhost password=hunter2-secret dbname"],
)
def test_an_unreadable_connection_string_is_a_user_error(dsn: str) -> None:
    with pytest.raises(UserError, match="connection string") as caught:
        PostgresStore(dsn)
    assert_secret_kept("hunter2-secret", caught.value)


def test_bad_arguments(postgres_dsn: str) -> None:
    for bad in ("", None, 5):
        with pytest.raises(UserError):
            PostgresStore(bad)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="pool_size"):
        PostgresStore(postgres_dsn, pool_size=0)
    with pytest.raises(UserError, match="connect_timeout"):
        PostgresStore(postgres_dsn, connect_timeout=0)


def test_errors_name_the_database_not_the_password(postgres_dsn: str, store: PostgresStore) -> None:
    with pytest.raises(StoreError, match=f"{store.url}.*schema") as caught:
        store.load("nope")
    assert_secret_kept(password_of(postgres_dsn), caught.value)
    store.close()
    with pytest.raises(StoreError, match=f"{store.url}.*closed"):
        store.list_sessions()


# -- lost connections ---------------------------------------------------------------------------


@pytest.fixture
def proxy(postgres_dsn: str) -> Iterator[Proxy]:
    given = params(postgres_dsn)
    with Proxy((given["host"], int(given["port"]))) as proxy:
        yield proxy


def through(dsn: str, proxy: Proxy) -> str:
    return psycopg.conninfo.make_conninfo(dsn, host="127.0.0.1", port=proxy.port)


@pytest.mark.parametrize("committed", [True, False], ids=["ack-lost", "commit-lost"])
def test_a_call_cut_off_is_a_connection_error_and_safe_to_retry(
    postgres_dsn: str, schema: str, proxy: Proxy, committed: bool
) -> None:
    with (
        PostgresStore(through(postgres_dsn, proxy), schema=schema) as store,
        PostgresStore(postgres_dsn, schema=schema) as direct,
    ):
        fill(store, events=2)
        batch = [event(seq) for seq in range(2, 12)]
        fired = proxy.cut_when(b"append_batch", deliver=committed)
        with pytest.raises(StoreConnectionError, match=r"lost the connection.*retrying it is safe"):
            store.append_events("s1", "root", batch)
        assert fired.is_set()
        # The server committed the batch when (and only when) the COMMIT reached it.
        assert direct.last_seq("s1", "root") == (11 if committed else 1)
        store.append_events("s1", "root", batch)  # a new connection; nothing twice
        assert direct.last_seq("s1", "root") == 11
        assert direct.list_sessions()[0].event_count == 12


def test_a_server_gone_away_is_a_connection_error(
    postgres_dsn: str, schema: str, proxy: Proxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    store = PostgresStore(through(postgres_dsn, proxy), schema=schema, connect_timeout=2)
    try:
        fill(store)
        proxy.close()
        with pytest.raises(StoreConnectionError, match=f"127.0.0.1:{proxy.port}") as caught:
            store.last_seq("s1", "root")
        assert_secret_kept(password_of(postgres_dsn), caught.value, caplog.text)
    finally:
        store.close()


# -- ownership ----------------------------------------------------------------------------------


def terminate_owner_connections(dsn: str) -> None:
    """Drop the owner connections (as a network failure would), waiting until they are gone."""
    with admin(dsn) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
            " WHERE application_name = 'actors-owner' AND datname = current_database()"
        )


def test_a_lost_owner_connection_frees_the_sessions(
    postgres_dsn: str, schema: str, store: PostgresStore
) -> None:
    fill(store)
    store.acquire("s1")
    terminate_owner_connections(postgres_dsn)
    with PostgresStore(postgres_dsn, schema=schema) as other:
        other.acquire("s1")  # the first store's lock went with its connection
        other.append_events("s1", "root", [event(5)])
        with pytest.raises(SessionBusyError):
            store.append_events("s1", "root", [event(6)])
        with pytest.raises(SessionBusyError):
            store.acquire("s1")
    assert store.last_seq("s1", "root") == 5


def test_a_lost_owner_connection_is_replaced_and_holds_again(
    postgres_dsn: str, schema: str, store: PostgresStore
) -> None:
    fill(store, "s1")
    fill(store, "s2")
    store.acquire("s1")
    terminate_owner_connections(postgres_dsn)
    store.append_events("s1", "root", [event(5)])  # nobody took it: still this store's
    store.acquire("s2")  # opens a new owner connection, which takes s1 back first
    with PostgresStore(postgres_dsn, schema=schema) as other:
        for session_id in ("s1", "s2"):
            with pytest.raises(SessionBusyError):
                other.acquire(session_id)


def test_owners_are_visible_to_operators(
    postgres_dsn: str, schema: str, store: PostgresStore
) -> None:
    store.acquire("s1")
    with admin(postgres_dsn) as conn:
        rows = conn.execute(f'SELECT session_id, pid FROM "{schema}".owners').fetchall()
    assert rows == [("s1", os.getpid())]
    store.release("s1")
    with admin(postgres_dsn) as conn:
        assert conn.execute(f'SELECT COUNT(*) FROM "{schema}".owners').fetchone() == (0,)


# -- a real crash -------------------------------------------------------------------------------


def test_sigkill_and_dropped_connections_lose_nothing_committed(
    postgres_dsn: str, schema: str
) -> None:
    """Every batch the child reported committed is stored, whole, after it was killed."""
    rng = random.Random(3)
    env = {**os.environ, "ACTORS_CHILD_POSTGRES_DSN": postgres_dsn}
    first = 0
    for round_ in range(3):
        command = [sys.executable, str(CHILD), f"postgres:{schema}", "crash", str(first)]
        with subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        ) as child:
            assert child.stdout is not None
            assert child.stderr is not None
            try:
                assert child.stdout.readline() == "ready\n", child.stderr.read()
                reported = first - 1
                for count in range(rng.randint(5, 40)):
                    if round_ == 1 and count == 3:  # the database drops the child's connections
                        with admin(postgres_dsn) as conn:
                            conn.execute(
                                "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
                                " WHERE application_name = 'actors' AND pid <> pg_backend_pid()"
                                " AND datname = current_database()"
                            )
                    line = child.stdout.readline()
                    if not line:  # the child died of the dropped connection: fine
                        break
                    reported = int(line)
            finally:
                os.kill(child.pid, signal.SIGKILL)
                child.wait()
        with PostgresStore(postgres_dsn, schema=schema) as store:
            last_seq = store.last_seq("crash", "root")
            stored = store.load("crash").agents[0].context["events"]
        assert last_seq >= (reported + 1) * BATCH - 1
        assert (last_seq + 1) % BATCH == 0
        assert stored == [event(seq).model_dump(mode="json") for seq in range(last_seq + 1)]
        first = max(reported, 0)


# -- the optional dependency --------------------------------------------------------------------


def test_importing_actors_does_not_import_the_driver() -> None:
    code = "import sys, actors, actors.store; print([m for m in sys.modules if 'psycopg' in m])"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


def test_without_the_driver_the_store_says_which_extra_to_install() -> None:
    code = (
        "import sys; sys.modules['psycopg'] = None; sys.modules['psycopg_pool'] = None\n"
        "from actors.exceptions import UserError\n"
        "from actors.store import PostgresStore\n"
        "try:\n"
        "    PostgresStore('postgresql://u:pw-secret@localhost/db')\n"
        "except UserError as error:\n"
        "    print(error)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert "pip install 'actors[postgres]'" in out.stdout
    assert "pw-secret" not in out.stdout


def test_a_version_3_schema_gains_blobs_and_reads_its_logs_unchanged(
    postgres_dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = _pg_sql.migrations
    with monkeypatch.context() as patch:  # what the previous release wrote: version 3
        patch.setattr(_pg_sql, "migrations", lambda name: real(name)[:3])
        patch.setattr(PostgresStore, "_check_fence", lambda *args: None)  # it had none
        with PostgresStore(postgres_dsn, schema=schema) as store:
            fill(store)
            before = store.read_events("s1", "root")
    ctx = AgentContext("root")
    for _ in range(6):
        ctx.add_message(UserMessage(content=["look", screenshot(1)]))
    with PostgresStore(postgres_dsn, schema=schema) as store:
        assert store.read_events("s1", "root") == before
        store.append_events("s1", "root", ctx.events[5:])
        assert store.read_events("s1", "root", start=5)[0]["data"] == ctx.events[5].data
    with admin(postgres_dsn) as conn:
        assert conn.execute(f'SELECT version FROM "{schema}".schema_version').fetchone() == (
            _pg_sql.SCHEMA_VERSION,
        )
        assert conn.execute(f'SELECT COUNT(*) FROM "{schema}".blobs').fetchone() == (1,)


def wait_for_a_lock(dsn: str, query: str) -> None:
    """Return once a statement LIKE ``query`` waits for a lock (the server says so)."""
    with admin(dsn) as watch:
        deadline = time.monotonic() + 20
        while not watch.execute(
            "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
            (query,),
        ).fetchone():
            assert time.monotonic() < deadline, f"no statement like {query!r} waited for a lock"
            time.sleep(0.01)  # polling the server: it has no notification of a lock wait


def test_a_sweep_waits_for_a_writer_that_refers_to_the_same_blob(
    postgres_dsn: str, schema: str
) -> None:
    """A delete that would sweep a blob waits for a writer holding it, then keeps it."""
    shot = screenshot(7)
    ctx = AgentContext("root")
    ctx.add_message(UserMessage(content=["look", shot]))
    with PostgresStore(postgres_dsn, schema=schema) as store:
        store.create_session("s1", root_agent_id="root")
        store.put_agent("s1", AgentRecord("root", None, "spec", "idle"))
        store.append_events("s1", "root", ctx.events)
        s = f'"{schema}"'
        with admin(postgres_dsn) as writer, writer.transaction():
            # What an append of another session does with a blob it finds stored, uncommitted.
            writer.execute(
                f"INSERT INTO {s}.blobs AS b (hash, media_type, size, data)"
                " VALUES (%s, 'image/png', 1, 'x') ON CONFLICT (hash) DO UPDATE SET size = b.size",
                (shot.sha256,),
            )
            writer.execute(f"INSERT INTO {s}.blob_refs VALUES ('s2', %s)", (shot.sha256,))
            deleting = threading.Thread(target=store.delete, args=("s1",))
            deleting.start()
            wait_for_a_lock(postgres_dsn, f"%{schema}%FOR UPDATE%")
        deleting.join(20)
        assert not deleting.is_alive()
    with admin(postgres_dsn) as conn:
        kept = conn.execute(f"SELECT hash FROM {s}.blobs").fetchall()
    assert kept == [(shot.sha256,)]


def test_a_writer_waits_for_a_sweep_of_the_same_blob_then_stores_it_again(
    postgres_dsn: str, schema: str
) -> None:
    """An append that finds a blob a delete is sweeping waits, then writes it anew."""
    shot = screenshot(8)
    ctx = AgentContext("root")
    ctx.add_message(UserMessage(content=["look", shot]))
    with PostgresStore(postgres_dsn, schema=schema) as store:
        for session_id in ("s1", "s2"):
            store.create_session(session_id, root_agent_id="root")
            store.put_agent(session_id, AgentRecord("root", None, "spec", "idle"))
        store.append_events("s1", "root", ctx.events)
        s = f'"{schema}"'
        with admin(postgres_dsn) as sweeper, sweeper.transaction():
            # What deleting s1 does, uncommitted: its references, then the blob they leave.
            sweeper.execute(f"DELETE FROM {s}.blob_refs WHERE session_id = 's1'")
            sweeper.execute(f"SELECT 1 FROM {s}.blobs FOR UPDATE").fetchall()
            sweeper.execute(f"DELETE FROM {s}.blobs")
            appending = threading.Thread(
                target=store.append_events, args=("s2", "root", ctx.events)
            )
            appending.start()
            wait_for_a_lock(postgres_dsn, f"%INSERT INTO {s}.blobs%")
        appending.join(20)
        assert not appending.is_alive()
        assert store.read_events("s2", "root")[0]["data"] == ctx.events[0].data
