"""`SQLiteStore`: the default `SessionStore`, one SQLite file in WAL mode."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC
from pathlib import Path
from typing import Any, Literal

from actors.context._events import Clock, Event, system_clock
from actors.exceptions import CorruptStoreError, SessionNotFoundError, StoreError, UserError
from actors.store import _sqlite_blobs as blobs
from actors.store import _sqlite_budgets as budgets
from actors.store import _sqlite_fences as fences
from actors.store import _sqlite_forks as forks
from actors.store import _sqlite_owners as owners
from actors.store._batch import (
    check_begin,
    check_id,
    check_own_record,
    check_range,
    check_record,
    check_storable,
    decode_data,
    decode_log,
    decode_time,
    encode_data,
    encode_events,
    externalize,
    new_events,
    stored_agents,
)
from actors.store._blobs import Blob, externalize_text, referenced
from actors.store._budgets import (
    BudgetTotals,
    Caps,
    Counts,
    check_reservation,
    check_settlement,
)
from actors.store._fences import check_fence_ids
from actors.store._fork import check_fork_args, fork_data, plan_fork
from actors.store._owner import close_holder, new_holder
from actors.store._protocol import SessionStore
from actors.store._records import AgentRecord, SessionInfo, StoredSession
from actors.store._schema import open_file, sqlite_errors
from actors.store._snapshots import encode_snapshot

__all__ = ["Durability", "SQLiteStore"]

Durability = Literal["sync", "batch"]
"""How hard a commit holds: ``"sync"`` survives power loss, ``"batch"`` survives a crash."""


class SQLiteStore(SessionStore):
    """A `SessionStore` in one SQLite file (standard-library ``sqlite3``, WAL mode).

    The file holds the tables ``sessions``, ``agents`` (id, parent id, name, status, spawn
    position), ``events`` (keyed by session, agent and seq, with the type, the payload as
    JSON text and the timestamp), ``snapshots`` (one per agent: a seq and JSON text) and
    ``blobs`` (the content of images, audio and documents in messages, once per SHA-256,
    referred to from the events; swept when no session refers to it), plus the holders of
    sessions, the forks' shared prefixes, shared budgets and the fences of agents (`fence`).
    Its schema version is the file's ``user_version``: a file of an older version is migrated
    on open; one of a newer version is refused.

    Durability modes (every `append_events` call is one transaction, committed before it
    returns; the runtime writes the events of a step in one call):

    - ``"batch"`` (default), ``synchronous=NORMAL``: a commit survives the process crashing or
      being killed (SIGKILL), since the write-ahead log is in the operating system's hands. On
      power loss or an OS crash the last commits may be lost (the file stays consistent). Fast:
      no fsync per commit.
    - ``"sync"``, ``synchronous=FULL``: each commit is fsynced before `append_events` returns,
      so it survives power loss too. Each commit costs one fsync.

    One connection, guarded by a lock, serves every thread. Other processes may open the same
    file (SQLite's locking serialises writers; a writer waits up to 10 s for the lock).

    `acquire` records this instance as a session's holder in the file (host, pid, a token of
    the process's start, and the instance). Another instance, in any process, that finds a
    holder on the same host whose process has ended (or whose store was closed) treats the
    session as free; a holder on another host always counts as alive.

    Example:
        >>> import tempfile, pathlib
        >>> from actors.store import AgentRecord, SQLiteStore
        >>> folder = tempfile.TemporaryDirectory()
        >>> with SQLiteStore(pathlib.Path(folder.name) / "sessions.db") as store:
        ...     store.create_session("s1", root_agent_id="root", data={"spec": "assistant"})
        ...     store.put_agent("s1", AgentRecord("root", None, "assistant", "idle"))
        ...     [info.session_id for info in store.list_sessions()]
        ['s1']
        >>> folder.cleanup()

    Args:
        path: The database file; created (with its tables) when missing or empty. Its
            directory must exist.
        durability: ``"batch"`` or ``"sync"``, see above.
        clock: Where the sessions' ``created_at`` and ``updated_at`` come from.

    Raises:
        CorruptStoreError: The file is damaged, truncated, or not a store of this library.
            Nothing is written to it.
        SchemaVersionError: A newer version of the library wrote the file. Nothing is written.
        StoreError: The file cannot be opened (missing directory, no permission, locked).
        UserError: An unknown durability mode.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durability: Durability = "batch",
        clock: Clock = system_clock,
    ) -> None:
        if durability not in ("sync", "batch"):
            raise UserError(f"durability must be 'sync' or 'batch', got {durability!r}")
        if not isinstance(path, str | os.PathLike):
            raise UserError(f"SQLiteStore takes a file path, got {type(path).__name__}")
        self._path = Path(path)
        self._durability: Durability = durability
        self._clock = clock
        self._lock = threading.Lock()
        self._held: set[str] = set()
        self._conn: sqlite3.Connection | None = open_file(self._path, durability)
        self._holder = new_holder(self)

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    @property
    def durability(self) -> Durability:
        """The durability mode: ``"sync"`` or ``"batch"``."""
        return self._durability

    def __repr__(self) -> str:
        state = " closed" if self._conn is None else ""
        return f"<SQLiteStore {os.fspath(self._path)!r} durability={self._durability!r}{state}>"

    # -- plumbing ---------------------------------------------------------------------------

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        with sqlite_errors(self._path, what):
            yield

    @contextmanager
    def _damaged(self, where: str) -> Iterator[None]:
        """Turn what a damaged row makes a decoder raise into `CorruptStoreError`."""
        try:
            yield
        except (ValueError, TypeError) as exc:  # UserError is a ValueError too
            raise CorruptStoreError(
                f"{self._path} is damaged: a stored row of {where} cannot be read ({exc}). "
                "Restore the file from a backup"
            ) from exc

    @contextmanager
    def _transaction(
        self, what: str, *, write: bool = True, single: bool = False
    ) -> Iterator[sqlite3.Connection]:
        """Hold the lock and one transaction; commit on success, roll back on any error.

        ``single``: the caller runs one read statement, atomic on its own: no BEGIN/COMMIT.
        """
        with self._lock:
            conn = self._conn
            if conn is None:
                raise StoreError(
                    f"the SQLiteStore on {self._path} is closed; open a new SQLiteStore"
                )
            if single and not write:
                with self._errors(what):
                    yield conn
                return
            with self._errors(what):
                # IMMEDIATE takes the write lock up front: two writers never deadlock on an
                # upgrade from read to write.
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.rollback()
                    raise

    def _now(self) -> str:
        return self._clock().astimezone(UTC).isoformat()

    def _check_writer(self, conn: sqlite3.Connection, session_id: str) -> None:
        # A session this instance holds needs no look: no one takes it from a live holder.
        if session_id not in self._held:
            owners.check_writer(conn, session_id, self._holder, str(self._path))

    def _check_fence(self, conn: sqlite3.Connection, session_id: str, agent_id: str) -> None:
        fences.check_fence(conn, session_id, agent_id, self._holder.token, str(self._path))

    def _missing(self, session_id: str) -> SessionNotFoundError:
        return SessionNotFoundError(
            f"no session {session_id!r} in {self._path}; store.list_sessions() lists the "
            "sessions it holds"
        )

    @staticmethod
    def _exists(conn: sqlite3.Connection, session_id: str) -> bool:
        row = conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (session_id,))
        return row.fetchone() is not None

    # -- the protocol -----------------------------------------------------------------------

    def create_session(
        self, session_id: str, *, root_agent_id: str, data: Mapping[str, Any] | None = None
    ) -> None:
        """Create a session, or do nothing when it exists with the same root.

        See `SessionStore.create_session`.
        """
        check_id("session_id", session_id)
        check_id("root_agent_id", root_agent_id)
        encoded = encode_data("session data", data)
        with self._transaction("creating a session") as conn:
            self._check_writer(conn, session_id)
            row = conn.execute(
                "SELECT root_agent_id FROM sessions WHERE session_id = ?", (session_id,)
            ).fetchone()
            if row is not None:
                if row[0] != root_agent_id:
                    raise StoreError(
                        f"session {session_id!r} exists in {self._path} with root agent "
                        f"{row[0]!r}, not {root_agent_id!r}; choose another session id or "
                        "delete the old session"
                    )
                return
            now = self._now()
            conn.execute(
                "INSERT INTO sessions (session_id, root_agent_id, data, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (session_id, root_agent_id, encoded, now, now),
            )

    def begin_session(
        self,
        session_id: str,
        root: AgentRecord,
        *,
        data: Mapping[str, Any] | None = None,
        acquire: bool = False,
    ) -> bool:
        """Claim, create and put the root of a session in one transaction.

        See `actors.store._protocol.begin_session`.
        """
        encoded = check_begin(session_id, root, data)
        claim = acquire and session_id not in self._held
        with self._transaction("beginning a session") as conn:
            now = self._now()
            if claim:
                owners.claim(conn, session_id, self._holder, now, str(self._path))
            else:
                self._check_writer(conn, session_id)
            row = conn.execute(
                "SELECT root_agent_id, (SELECT MAX(seq) FROM events AS e"
                " WHERE e.session_id = s.session_id AND e.agent_id = ?)"
                " FROM sessions AS s WHERE s.session_id = ?",
                (root.agent_id, session_id),
            ).fetchone()
            if row is not None and row[0] != root.agent_id:
                raise StoreError(
                    f"session {session_id!r} exists in {self._path} with root agent "
                    f"{row[0]!r}, not {root.agent_id!r}; choose another session id or "
                    "delete the old session"
                )
            if row is None:
                conn.execute(
                    "INSERT INTO sessions (session_id, root_agent_id, data, created_at,"
                    " updated_at) VALUES (?, ?, ?, ?, ?)",
                    (session_id, root.agent_id, encoded, now, now),
                )
            # A root with a log is left alone: the caller restores it instead.
            has_log = row is not None and (
                row[1] is not None or forks.prefix_last(conn, session_id, root.agent_id) >= 0
            )
            if not has_log:  # the session's row and its writer were checked just above
                conn.execute(
                    "INSERT INTO agents (session_id, agent_id, parent_id, name, status, position)"
                    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (session_id, agent_id) DO UPDATE SET"
                    " parent_id = excluded.parent_id, name = excluded.name,"
                    " status = excluded.status, position = excluded.position",
                    (
                        session_id,
                        root.agent_id,
                        root.parent_id,
                        root.name,
                        root.status,
                        root.position,
                    ),
                )
                if row is not None:
                    conn.execute(
                        "UPDATE sessions SET updated_at = ? WHERE session_id = ?", (now, session_id)
                    )
        if claim:
            self._held.add(session_id)
        return not has_log

    def put_agent(self, session_id: str, record: AgentRecord) -> None:
        """Insert or update an agent of the session. See `SessionStore.put_agent`."""
        check_storable(session_id)
        check_record(record)
        with self._transaction("putting an agent") as conn:
            self._put(conn, session_id, record)

    def _put(self, conn: sqlite3.Connection, session_id: str, record: AgentRecord) -> None:
        if not self._exists(conn, session_id):
            raise self._missing(session_id)
        self._check_writer(conn, session_id)
        self._check_fence(conn, session_id, record.agent_id)
        conn.execute(
            "INSERT INTO agents (session_id, agent_id, parent_id, name, status, position)"
            " VALUES (?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (session_id, agent_id) DO UPDATE SET parent_id = excluded.parent_id,"
            " name = excluded.name, status = excluded.status, position = excluded.position",
            (
                session_id,
                record.agent_id,
                record.parent_id,
                record.name,
                record.status,
                record.position,
            ),
        )
        conn.execute(
            "UPDATE sessions SET updated_at = ? WHERE session_id = ?",
            (self._now(), session_id),
        )

    def append_events(
        self,
        session_id: str,
        agent_id: str,
        events: Sequence[Event],
        *,
        record: AgentRecord | None = None,
    ) -> None:
        """Append a batch of events to an agent's log. See `SessionStore.append_events`."""
        check_storable(session_id, agent_id)
        # Outside the lock: pure CPU. Parts' data leaves the events for the blobs table.
        batch, new_blobs = externalize(encode_events(session_id, agent_id, events))
        if record is not None:
            check_own_record(record, agent_id)
        with self._transaction("appending events") as conn:
            if record is not None:
                self._put(conn, session_id, record)  # rolled back with the events on failure
            # One query: no row when the agent was never put, else its highest seq (or None).
            row = conn.execute(
                "SELECT (SELECT MAX(seq) FROM events AS e"
                " WHERE e.session_id = a.session_id AND e.agent_id = a.agent_id)"
                " FROM agents AS a WHERE a.session_id = ? AND a.agent_id = ?",
                (session_id, agent_id),
            ).fetchone()
            if row is None:
                if not self._exists(conn, session_id):
                    raise self._missing(session_id)
                self._check_writer(conn, session_id)
                raise StoreError(
                    f"agent {agent_id!r} is not part of session {session_id!r} in {self._path}; "
                    "put_agent() it before appending its events"
                )
            self._check_writer(conn, session_id)
            if record is None:  # else checked as it was put
                self._check_fence(conn, session_id, agent_id)
            if not batch:
                return
            shared = forks.prefix_last(conn, session_id, agent_id)  # a fork's prefix
            last = max(shared, -1 if row[0] is None else int(row[0]))

            def stored(low: int, high: int) -> dict[int, tuple[str, str]]:
                found: dict[int, tuple[str, str]] = {}
                for where, agent, stop in forks.segments(conn, session_id, agent_id, high + 1):
                    rows = conn.execute(
                        "SELECT seq, type, data FROM events"
                        " WHERE session_id = ? AND agent_id = ? AND seq >= ? AND seq < ?",
                        (where, agent, low, stop),
                    )
                    found.update((seq, (kind, data)) for seq, kind, data in rows)
                return found

            fresh = new_events(session_id, agent_id, batch, last, stored)
            if not fresh:
                return
            conn.executemany(
                "INSERT INTO events (session_id, agent_id, seq, type, data, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                [(session_id, agent_id, e.seq, e.type, e.data, e.created_at) for e in fresh],
            )
            blobs.put_blobs(conn, session_id, new_blobs)
            conn.execute(
                "UPDATE sessions SET updated_at = ?, event_count = event_count + ?"
                " WHERE session_id = ?",
                (self._now(), len(fresh), session_id),
            )

    def load(self, session_id: str, *, snapshots: bool = False) -> StoredSession:
        """The whole session, agents in spawn order. See `SessionStore.load`."""
        check_storable(session_id)
        kept: dict[str, tuple[int, str]] = {}
        with self._transaction("loading a session", write=False) as conn:
            head = conn.execute(
                "SELECT root_agent_id, data, created_at, updated_at FROM sessions"
                " WHERE session_id = ?",
                (session_id,),
            ).fetchone()
            if head is None:
                raise self._missing(session_id)
            agent_rows = conn.execute(
                "SELECT agent_id, parent_id, name, status, position FROM agents"
                " WHERE session_id = ? ORDER BY position, rowid",
                (session_id,),
            ).fetchall()
            if snapshots:
                rows = conn.execute(
                    "SELECT agent_id, seq, data FROM snapshots WHERE session_id = ?",
                    (session_id,),
                )
                kept = {agent_id: (seq, data) for agent_id, seq, data in rows}
            if kept or forks.has_forks(conn, session_id):
                # Agent by agent, each from its snapshot's seq: ranges of the primary key (a
                # fork's agent reads its shared prefix first, where it is stored).
                event_rows = []
                for agent_id in sorted({row[0] for row in agent_rows}):
                    first = kept.get(agent_id, (0, ""))[0]
                    for where, agent, stop in forks.segments(conn, session_id, agent_id):
                        event_rows += conn.execute(
                            "SELECT ?, seq, type, data, created_at FROM events"
                            " WHERE session_id = ? AND agent_id = ? AND seq >= ? AND seq < ?"
                            " ORDER BY seq",
                            (agent_id, where, agent, first, stop),
                        ).fetchall()
            else:
                event_rows = conn.execute(
                    "SELECT agent_id, seq, type, data, created_at FROM events"
                    " WHERE session_id = ? ORDER BY agent_id, seq",
                    (session_id,),
                ).fetchall()
            texts = [row[3] for row in event_rows] + [text for _, text in kept.values()]
            hashes = referenced(texts)
            found: dict[str, Blob] = blobs.fetch(conn, hashes) if hashes else {}

        # Decoding happens outside the lock, on rows of one consistent snapshot.
        def damaged(agent_id: str, exc: Exception) -> StoreError:
            return CorruptStoreError(
                f"{self._path} is damaged: a stored row of agent {agent_id!r} of session "
                f"{session_id!r} cannot be read ({exc}). Restore the file from a backup"
            )

        agents = stored_agents(agent_rows, event_rows, damaged, kept, found)
        root, data, created_at, updated_at = head
        with self._damaged(f"session {session_id!r}"):
            return StoredSession(
                session_id,
                check_id("root_agent_id", root),
                decode_data(data),
                decode_time(created_at),
                decode_time(updated_at),
                agents,
            )

    def read_events(
        self, session_id: str, agent_id: str, *, start: int = 0, stop: int | None = None
    ) -> list[dict[str, Any]]:
        """The agent's events with ``start <= seq < stop``. See `SessionStore.read_events`."""
        start, stop = check_range(start, stop)
        with self._transaction("reading events", write=False) as conn:
            if not self._exists(conn, session_id):
                raise self._missing(session_id)
            end = stop if stop is not None else 2**63 - 1
            rows = []
            for where, agent, below in forks.segments(conn, session_id, agent_id, end):
                rows += conn.execute(
                    "SELECT seq, type, data, created_at FROM events WHERE session_id = ?"
                    " AND agent_id = ? AND seq >= ? AND seq < ? ORDER BY seq",
                    (where, agent, start, below),
                ).fetchall()
            hashes = referenced(row[2] for row in rows)
            found: dict[str, Blob] = blobs.fetch(conn, hashes) if hashes else {}
        with self._damaged(f"agent {agent_id!r} of session {session_id!r}"):
            return decode_log(rows, found)

    def put_snapshot(self, session_id: str, agent_id: str, snapshot: Mapping[str, Any]) -> None:
        """Keep the agent's snapshot. See `SessionStore.put_snapshot`."""
        seq, text = encode_snapshot(session_id, agent_id, snapshot)  # outside the lock
        found: dict[str, Blob] = {}
        text = externalize_text(text, found)
        with self._transaction("writing a snapshot") as conn:
            if not self._exists(conn, session_id):
                raise self._missing(session_id)
            self._check_writer(conn, session_id)
            known = conn.execute(
                "SELECT 1 FROM agents WHERE session_id = ? AND agent_id = ?",
                (session_id, agent_id),
            ).fetchone()
            if known is None:
                raise StoreError(
                    f"agent {agent_id!r} is not part of session {session_id!r} in "
                    f"{self._path}; put_agent() it before writing its snapshot"
                )
            self._check_fence(conn, session_id, agent_id)
            conn.execute(
                "INSERT INTO snapshots (session_id, agent_id, seq, data) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (session_id, agent_id) DO UPDATE SET seq = excluded.seq,"
                " data = excluded.data",
                (session_id, agent_id, seq, text),
            )
            blobs.put_blobs(conn, session_id, found)

    def fork(
        self, session_id: str, new_session_id: str, *, at: int | None, root_agent_id: str
    ) -> None:
        """Fork the session just after its root's event ``at``. See `SessionStore.fork`.

        One transaction writes the new session, its agents and, per agent, a row of the
        ``forks`` table pointing at the prefix it shares: no event is copied.
        """
        check_fork_args(session_id, new_session_id, at)
        check_id("root_agent_id", root_agent_id)
        with self._transaction("forking a session") as conn:
            head = conn.execute(
                "SELECT root_agent_id, data FROM sessions WHERE session_id = ?", (session_id,)
            ).fetchone()
            if head is None:
                raise self._missing(session_id)
            self._check_writer(conn, new_session_id)
            if self._exists(conn, new_session_id):
                raise StoreError(
                    f"session {new_session_id!r} exists already in {self._path}; fork into a "
                    "new session id"
                )
            agent_rows = conn.execute(
                "SELECT agent_id, parent_id, name, status, position FROM agents"
                " WHERE session_id = ? ORDER BY position, rowid",
                (session_id,),
            ).fetchall()
            with self._damaged(f"session {session_id!r}"):
                records = [AgentRecord(*row) for row in agent_rows]
                source_data = decode_data(head[1])

            def last(agent_id: str) -> int:
                row = conn.execute(
                    "SELECT MAX(seq) FROM events WHERE session_id = ? AND agent_id = ?",
                    (session_id, agent_id),
                ).fetchone()
                own = -1 if row[0] is None else int(row[0])
                return max(own, forks.prefix_last(conn, session_id, agent_id))

            planned = plan_fork(
                records,
                head[0],
                root_agent_id,
                at,
                {record.agent_id: last(record.agent_id) for record in records},
                lambda probes: [
                    forks.event_created_at(conn, session_id, agent, seq) for agent, seq in probes
                ],
            )
            data = fork_data(source_data, session_id, at, head[0], root_agent_id, planned)
            now = self._now()
            conn.execute(
                "INSERT INTO sessions (session_id, root_agent_id, data, created_at, updated_at,"
                " event_count) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    new_session_id,
                    root_agent_id,
                    encode_data("session data", data),
                    now,
                    now,
                    sum(a.upto for a in planned),
                ),
            )
            conn.executemany(
                "INSERT INTO agents (session_id, agent_id, parent_id, name, status, position)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (
                        new_session_id,
                        a.record.agent_id,
                        a.record.parent_id,
                        a.record.name,
                        a.record.status,
                        a.record.position,
                    )
                    for a in planned
                ],
            )
            forks.insert_fork(conn, new_session_id, session_id, planned)

    def list_sessions(self) -> list[SessionInfo]:
        """Every session, the most recently created first. See `SessionStore.list_sessions`."""
        with self._transaction("listing sessions", write=False) as conn:
            rows = conn.execute(
                "SELECT s.session_id, s.root_agent_id, s.data, s.created_at, s.updated_at,"
                " (SELECT COUNT(*) FROM agents AS a WHERE a.session_id = s.session_id),"
                " s.event_count FROM sessions AS s ORDER BY s.rowid DESC"
            ).fetchall()
        sessions = []
        for session_id, root, data, created_at, updated_at, agent_count, event_count in rows:
            with self._damaged(f"session {session_id!r}"):
                sessions.append(
                    SessionInfo(
                        session_id=check_id("session_id", session_id),
                        root_agent_id=check_id("root_agent_id", root),
                        data=decode_data(data),
                        created_at=decode_time(created_at),
                        updated_at=decode_time(updated_at),
                        agent_count=agent_count,
                        event_count=event_count,
                    )
                )
        return sessions

    def delete(self, session_id: str) -> None:
        """Delete a session with its agents and events. See `SessionStore.delete`."""
        check_storable(session_id)
        with self._transaction("deleting a session") as conn:
            if not self._exists(conn, session_id):
                raise self._missing(session_id)
            self._check_writer(conn, session_id)
            forks.detach_forks(conn, session_id)  # its forks keep the prefixes they share
            for table in ("forks", "fences", "snapshots", "events", "agents", "sessions"):
                conn.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))
            blobs.drop_refs(conn, session_id)  # and the blobs nothing else refers to

    def last_seq(self, session_id: str, agent_id: str) -> int:
        """The agent's highest stored seq, -1 when none. See `SessionStore.last_seq`."""
        check_storable(session_id, agent_id)
        # Without an agent (has_session): one statement, no transaction around it.
        with self._transaction("reading the last seq", write=False, single=not agent_id) as conn:
            row = conn.execute(
                "SELECT (SELECT MAX(seq) FROM events AS e"
                " WHERE e.session_id = s.session_id AND e.agent_id = ?)"
                " FROM sessions AS s WHERE s.session_id = ?",
                (agent_id, session_id),
            ).fetchone()
            if row is not None and agent_id:
                shared = forks.prefix_last(conn, session_id, agent_id)
                row = (max(shared, -1 if row[0] is None else int(row[0])),)
        if row is None:
            raise self._missing(session_id)
        return -1 if row[0] is None else int(row[0])

    def fence(self, session_id: str, agent_ids: Sequence[str] | None = None) -> int:
        """Make this instance the only writer of agents of a session; their new epoch.

        See `actors.store._fences.fence`: every write to them through another instance
        raises `FencedWriteError` from now on.
        """
        check_storable(session_id)
        ids = check_fence_ids(agent_ids)
        with self._transaction("fencing agents") as conn:
            if not self._exists(conn, session_id):
                raise self._missing(session_id)
            self._check_writer(conn, session_id)
            return fences.take_over(conn, session_id, ids, self._holder.token, str(self._path))

    def acquire(self, session_id: str) -> None:
        """Make this store the session's only writer. See `SessionStore.acquire`."""
        check_id("session_id", session_id)
        if session_id in self._held:
            return
        with self._transaction("acquiring a session") as conn:
            owners.claim(conn, session_id, self._holder, self._now(), str(self._path))
            self._held.add(session_id)

    def release(self, session_id: str) -> None:
        """Stop holding the session. Idempotent. See `SessionStore.release`."""
        check_storable(session_id)
        if session_id not in self._held:
            return
        with self._transaction("releasing a session") as conn:
            owners.release(conn, session_id, self._holder)
            self._held.discard(session_id)

    # -- shared budgets (`BudgetStore`) ------------------------------------------------------

    def reserve_budget(
        self, budget: str, hold: str, amount: Counts, caps: Caps
    ) -> BudgetTotals | None:
        """Hold ``amount`` on ``budget`` if it fits. See `BudgetStore.reserve_budget`."""
        check_reservation(budget, hold, amount, caps)
        with self._transaction("reserving on a budget") as conn:
            return budgets.reserve(conn, budget, hold, amount, caps)

    def settle_budget(self, budget: str, hold: str, spent: Counts) -> bool:
        """End a hold, counting ``spent``. See `BudgetStore.settle_budget`."""
        check_settlement(budget, hold, spent)
        with self._transaction("settling a budget's hold") as conn:
            return budgets.settle(conn, budget, hold, spent)

    def read_budget(self, budget: str) -> BudgetTotals:
        """The budget's totals. See `BudgetStore.read_budget`."""
        check_id("budget", budget)
        with self._transaction("reading a budget", write=False, single=True) as conn:
            return budgets.read(conn, budget)

    def close(self) -> None:
        """Release every session held and close the connection. Idempotent.

        SQLite checkpoints the write-ahead log.
        """
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is None:
                return
            try:
                with self._errors("closing"):
                    if self._held:
                        conn.execute("BEGIN IMMEDIATE")
                        owners.release_all(conn, self._holder)
                        conn.execute("COMMIT")
            finally:
                # Whatever happened above, the claims no longer count: this store is closed.
                self._held.clear()
                close_holder(self._holder)
                with self._errors("closing"):
                    conn.close()
