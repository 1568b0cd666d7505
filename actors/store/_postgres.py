"""`PostgresStore`: a `SessionStore` in a PostgreSQL database, shared by many hosts.

Importing this module does not import the driver: `PostgresStore` imports psycopg when it is
constructed, so ``import actors.store`` works without the ``actors[postgres]`` extra.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from actors.context._events import Clock, Event, system_clock
from actors.exceptions import CorruptStoreError, SessionNotFoundError, StoreError, UserError
from actors.store import _pg_blobs as blobs
from actors.store import _pg_budgets as budgets
from actors.store import _pg_forks as forks
from actors.store._batch import (
    EncodedEvent,
    check_begin,
    check_id,
    check_own_record,
    check_range,
    check_record,
    check_storable,
    decode_data,
    decode_log,
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
from actors.store._fences import check_fence_ids, fenced
from actors.store._fork import check_fork_args, fork_data, plan_fork
from actors.store._owner import busy, close_holder, new_holder
from actors.store._pg_holds import Holds
from actors.store._pg_sql import Statements
from actors.store._protocol import SessionStore
from actors.store._records import AgentRecord, SessionInfo, StoredSession
from actors.store._snapshots import encode_snapshot

if TYPE_CHECKING:
    from actors.store._pg_link import Connection, Link
    from actors.store._pg_target import Target

__all__ = ["PostgresStore"]


def _driver() -> tuple[type[Target], type[Link]]:
    """The driver-backed classes, imported now.

    Raises:
        UserError: psycopg 3 or psycopg_pool is not installed.
    """
    try:
        from actors.store._pg_link import Link
        from actors.store._pg_target import Target
    except ImportError as exc:
        if not (exc.name or "").startswith("psycopg"):
            raise
        raise UserError(
            f"PostgresStore needs psycopg 3 and psycopg_pool, and {exc.name!r} cannot be "
            "imported; install them with: pip install 'actors[postgres]'"
        ) from exc
    return Target, Link


class PostgresStore(SessionStore):
    """A `SessionStore` in a PostgreSQL database (psycopg 3, with a connection pool).

    Its tables (``sessions``, ``agents``, ``events``, ``snapshots``, ``forks``, ``blobs`` and
    ``blob_refs``, ``owners`` and ``schema_version``) live in one Postgres schema, created
    with them when missing; a schema of an older version is migrated on open, one of a newer
    version is refused. Several stores, in one process or on many hosts, may use the same
    schema at once. The content of images, audio and documents in messages is kept once per
    SHA-256 in ``blobs``, referred to from the events, and swept when no session refers to it.

    Durability: every `append_events` call is one transaction, committed before it returns,
    and each commit waits until the server has flushed it to its write-ahead log on disk
    (``synchronous_commit`` is raised to ``on`` for the store's connections when the server
    has it lower). An acknowledged event survives the process crashing, the connection
    dropping, and the server crashing. A call cut off by a lost connection raises
    `StoreConnectionError`; it may or may not have committed, and appending the same events
    again is harmless.

    Ownership: `acquire` takes a session-level advisory lock on a dedicated connection of this
    store and records the holder (host, pid) in the ``owners`` table. The server drops the lock
    when that connection ends, so the sessions of a process that died are free as soon as the
    server sees its connection close (at once on a crash; for a host that vanished, after TCP
    keepalives give up, about a minute).

    The connection string is never shown: the repr and every error name the user, host, port
    and database only. Prefer PGPASSWORD or ``~/.pgpass`` to a password in the string.

    Example:
        >>> store = PostgresStore("postgresql://app@db.internal:5432/agents")  # doctest: +SKIP
        >>> store.acquire("support-42")  # doctest: +SKIP

    Args:
        dsn: A libpq connection string: ``postgresql://user:password@host:port/dbname`` or
            ``"host=... dbname=..."``; what it leaves out comes from the PG* environment
            variables and libpq's defaults.
        schema: The Postgres schema holding the store's tables.
        pool_size: The most connections the store opens at once for its calls (it opens one
            more to hold sessions, once it acquires one).
        connect_timeout: Seconds to wait for a connection before a call fails.
        clock: Where the sessions' ``created_at`` and ``updated_at`` come from.

    Raises:
        UserError: psycopg is not installed (``pip install 'actors[postgres]'``), or an
            argument cannot be used (an unreadable connection string, a bad schema name).
        StoreAuthenticationError: The server refused the user or password.
        DatabaseNotFoundError: The database does not exist.
        StoreConnectionError: The server cannot be reached.
        SchemaVersionError: A newer version of the library wrote the schema; nothing written.
        CorruptStoreError: The schema holds tables that are not a store's.
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "actors",
        pool_size: int = 8,
        connect_timeout: float = 10.0,
        clock: Clock = system_clock,
    ) -> None:
        target_type, link_type = _driver()
        self._sql = Statements(schema)
        self._sql.s  # noqa: B018  # checks the schema name before anything connects
        if not isinstance(pool_size, int) or isinstance(pool_size, bool) or pool_size < 1:
            raise UserError(f"pool_size must be a positive int, got {pool_size!r}")
        if not isinstance(connect_timeout, int | float) or not connect_timeout > 0:
            raise UserError(f"connect_timeout must be a positive number, got {connect_timeout!r}")
        self._target = target_type.parse(dsn)
        self._clock = clock
        self._lock = threading.Lock()
        self._holds = Holds(self._sql, new_holder(self), self._target.url)
        self._link: Link | None = link_type(
            self._target, self._sql, pool_size=pool_size, connect_timeout=connect_timeout
        )

    @property
    def url(self) -> str:
        """Where the store is, without the password: ``postgresql://user@host:port/dbname``."""
        return self._target.url

    @property
    def schema(self) -> str:
        """The Postgres schema holding the store's tables."""
        return self._sql.schema

    def __repr__(self) -> str:
        state = " closed" if self._link is None else ""
        return f"<PostgresStore {self._target.url} schema={self.schema!r}{state}>"

    # -- plumbing ---------------------------------------------------------------------------

    def _open(self) -> Link:
        link = self._link
        if link is None:
            raise StoreError(f"the PostgresStore on {self.url} is closed; open a new PostgresStore")
        return link

    def _now(self) -> datetime:
        return self._clock().astimezone(UTC)

    def _missing(self, session_id: str) -> SessionNotFoundError:
        return SessionNotFoundError(
            f"no session {session_id!r} in {self.url} (schema {self.schema!r}); "
            "store.list_sessions() lists the sessions it holds"
        )

    def _lock_session(self, conn: Connection, session_id: str, *, share: bool = True) -> bool:
        """Lock the session's row until the transaction ends; False when the session is missing.

        Writers share the lock; an acquirer (or a delete) takes it alone, so it waits for the
        writers in flight and they wait for it. A statement that runs after the lock was
        granted sees every claim committed before (each statement takes a new snapshot).
        """
        sql = self._sql.share_session if share else self._sql.lock_session
        return conn.execute(sql, {"session": session_id}).fetchone() is not None

    def _check_fence(self, conn: Connection, session_id: str, agent_id: str) -> None:
        """Raise `FencedWriteError` when another instance fenced the agent."""
        params = {"session": session_id, "agent": agent_id, "token": self._holds.holder.token}
        row = conn.execute(self._sql.other_fence, params).fetchone()
        if row is not None:
            raise fenced(session_id, agent_id, int(row[0]), self.url)

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
        now = self._now()

        def work(conn: Connection) -> None:
            self._lock_session(conn, session_id)
            self._holds.check_writer(conn, session_id)
            params = {"session": session_id, "root": root_agent_id, "data": encoded, "now": now}
            conn.execute(self._sql.create_session, params)
            (root,) = conn.execute(self._sql.root_of, params).fetchone() or (None,)
            if root != root_agent_id:
                raise StoreError(
                    f"session {session_id!r} exists in {self.url} with root agent {root!r}, "
                    f"not {root_agent_id!r}; choose another session id or delete the old session"
                )

        self._open().run("creating a session", work)

    def begin_session(
        self,
        session_id: str,
        root: AgentRecord,
        *,
        data: Mapping[str, Any] | None = None,
        acquire: bool = False,
    ) -> bool:
        """Claim a session, then create it and put its root in one transaction.

        See `actors.store._protocol.begin_session`.
        """
        encoded = check_begin(session_id, root, data)
        if acquire:  # the claim has its own path (a held lock, re-armed on reconnect)
            self.acquire(session_id)
        params = self._agent_params(session_id, root)
        params.update(root=root.agent_id, data=encoded)

        def work(conn: Connection) -> bool:
            self._lock_session(conn, session_id)
            self._holds.check_writer(conn, session_id)
            conn.execute(self._sql.create_session, params)
            (stored,) = conn.execute(self._sql.root_of, params).fetchone() or (None,)
            if stored != root.agent_id:
                raise StoreError(
                    f"session {session_id!r} exists in {self.url} with root agent {stored!r}, "
                    f"not {root.agent_id!r}; choose another session id or delete the old "
                    "session"
                )
            (last,) = conn.execute(self._sql.last_seq, params).fetchone() or (None,)
            if last is not None:
                return False  # the root has a log: put nothing (the caller restores it)
            conn.execute(self._sql.put_agent, params)
            return True

        written: bool = self._open().run("beginning a session", work)
        return written

    def put_agent(self, session_id: str, record: AgentRecord) -> None:
        """Insert or update an agent of the session. See `SessionStore.put_agent`."""
        check_storable(session_id)
        check_record(record)
        params = self._agent_params(session_id, record)

        def work(conn: Connection) -> None:
            if not self._lock_session(conn, session_id):
                raise self._missing(session_id)
            self._holds.check_writer(conn, session_id)
            self._check_fence(conn, session_id, record.agent_id)
            conn.execute(self._sql.put_agent, params)

        self._open().run("putting an agent", work)

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
        # Parts' data leaves the events for the blobs table (see `actors.store._blobs`).
        batch, new_blobs = externalize(encode_events(session_id, agent_id, events))
        if record is not None:
            check_own_record(record, agent_id)
        params = self._holds.params(session_id, agent=agent_id, now=self._now())
        if batch and record is None and not new_blobs:
            # The common case in one round trip: the batch continues the stored log. Here: is
            # it contiguous, from a seq >= 0? The server checks that it starts where the log
            # ends, and appends it, or says why not.
            new_events(session_id, agent_id, batch, batch[0].seq - 1, lambda a, b: {})
            status, last_or_epoch, host, pid = self._open().run(
                "appending events",
                lambda conn: (
                    conn.execute(
                        self._sql.append_batch, {**params, **self._columns(batch)}
                    ).fetchone()
                    or ("", None, None, None)
                ),
                single=True,
            )
            if status == "appended":
                return
            if status == "missing":
                raise self._missing(session_id)
            if status == "busy":
                raise busy(session_id, host, pid, self.url)
            if status == "unknown agent":
                raise self._unknown_agent(session_id, agent_id)
            if status == "fenced":
                raise fenced(session_id, agent_id, int(last_or_epoch or 0), self.url)
        # Anything else (an empty batch, a re-append, a gap): the checks of `new_events`.

        def stored(conn: Connection, first: int, last: int) -> dict[int, tuple[str, str]]:
            rows = forks.read_through(conn, self._sql.s, session_id, agent_id, first, last + 1)
            return {seq: (kind, data) for seq, kind, data, _ in rows}

        def work(conn: Connection) -> None:
            if not self._lock_session(conn, session_id):
                raise self._missing(session_id)
            if record is not None:  # in this transaction: refused with the events, or not
                self._holds.check_writer(conn, session_id)
            self._check_fence(conn, session_id, agent_id)
            if record is not None:
                conn.execute(self._sql.put_agent, self._agent_params(session_id, record))
            head = conn.execute(self._sql.append_head, params).fetchone()
            known, last, host, pid = head or (False, None, None, None)
            if pid is not None:
                raise busy(session_id, host, pid, self.url)
            if not known:
                raise self._unknown_agent(session_id, agent_id)
            last_seq = -1 if last is None else int(last)
            fresh = new_events(
                session_id, agent_id, batch, last_seq, lambda a, b: stored(conn, a, b)
            )
            if fresh:
                conn.execute(
                    self._sql.insert_events,
                    {**params, **self._columns(fresh), "added": len(fresh)},
                )
                blobs.put_blobs(conn, self._sql.s, session_id, new_blobs)

        self._open().run("appending events", work)

    def _agent_params(self, session_id: str, record: AgentRecord) -> dict[str, Any]:
        return {
            "session": session_id,
            "agent": record.agent_id,
            "parent": record.parent_id,
            "name": record.name,
            "status": record.status,
            "position": record.position,
            "now": self._now(),
        }

    @staticmethod
    def _columns(batch: Sequence[EncodedEvent]) -> dict[str, list[Any]]:
        return {
            "seqs": [event.seq for event in batch],
            "types": [event.type for event in batch],
            "datas": [event.data for event in batch],
            "times": [event.created_at for event in batch],
        }

    def _unknown_agent(self, session_id: str, agent_id: str) -> StoreError:
        return StoreError(
            f"agent {agent_id!r} is not part of session {session_id!r} in {self.url}; "
            "put_agent() it before appending its events"
        )

    def load(self, session_id: str, *, snapshots: bool = False) -> StoredSession:
        """The whole session, agents in spawn order. See `SessionStore.load`."""
        check_storable(session_id)
        params = {"session": session_id}
        kept: dict[str, tuple[int, str]] = {}

        found: dict[str, Blob] = {}

        def work(conn: Connection) -> tuple[Any, list[Any], list[Any]]:
            head, agents, events = rows(conn)
            texts = [row[3] for row in events] + [text for _, text in kept.values()]
            if hashes := referenced(texts):
                found.update(blobs.fetch(conn, self._sql.s, hashes))
            return head, agents, events

        def rows(conn: Connection) -> tuple[Any, list[Any], list[Any]]:
            head = conn.execute(self._sql.load_head, params).fetchone()
            if head is None:
                raise self._missing(session_id)
            agents = conn.execute(self._sql.load_agents, params).fetchall()
            if snapshots:
                rows = conn.execute(self._sql.load_snapshots, params).fetchall()
                kept.update((agent_id, (int(seq), data)) for agent_id, seq, data in rows)
            if forks.has_forks(conn, self._sql.s, session_id):
                # A fork's agents one by one, each reading its shared prefix through.
                through = []
                for agent_id in sorted({row[0] for row in agents}):
                    start = kept.get(agent_id, (0, ""))[0]
                    rows = forks.read_through(
                        conn, self._sql.s, session_id, agent_id, start, forks.NO_END
                    )
                    through += [(agent_id, *row) for row in rows]
                return head, agents, through
            if not kept:
                return head, agents, conn.execute(self._sql.load_events, params).fetchall()
            # The agents with a snapshot one by one, each from its seq: a range of the primary
            # key with a literal bound (a join on the snapshot's seq reads the whole log).
            others = sorted({row[0] for row in agents} - kept.keys())
            events = (
                conn.execute(self._sql.load_events_of, {**params, "agents": others}).fetchall()
                if others
                else []
            )
            for agent_id in sorted(kept):
                start = kept[agent_id][0]
                bounds = {**params, "agent": agent_id, "start": start, "stop": 2**63 - 1}
                events += [
                    (agent_id, *row)
                    for row in conn.execute(self._sql.read_events, bounds).fetchall()
                ]
            events.sort(key=lambda row: row[0])  # stable: grouped by agent, in seq order
            return head, agents, events

        head, agent_rows, event_rows = self._open().run("loading a session", work, snapshot=True)

        def damaged(agent_id: str, exc: Exception) -> StoreError:
            return CorruptStoreError(
                f"a stored row of agent {agent_id!r} of session {session_id!r} in {self.url} "
                f"cannot be read ({exc}); restore the database from a backup"
            )

        root, data, created_at, updated_at = head
        agents = stored_agents(agent_rows, event_rows, damaged, kept, found)
        session_data = self._session_data(session_id, data)
        return StoredSession(session_id, root, session_data, created_at, updated_at, agents)

    def read_events(
        self, session_id: str, agent_id: str, *, start: int = 0, stop: int | None = None
    ) -> list[dict[str, Any]]:
        """The agent's events with ``start <= seq < stop``. See `SessionStore.read_events`."""
        start, stop = check_range(start, stop)
        end = stop if stop is not None else forks.NO_END
        params = {"session": session_id, "agent": agent_id}

        found: dict[str, Blob] = {}

        def work(conn: Connection) -> list[Any]:
            if conn.execute(self._sql.root_of, params).fetchone() is None:
                raise self._missing(session_id)
            rows = forks.read_through(conn, self._sql.s, session_id, agent_id, start, end)
            if hashes := referenced(row[2] for row in rows):
                found.update(blobs.fetch(conn, self._sql.s, hashes))
            return rows

        rows = self._open().run("reading events", work, snapshot=True)
        try:
            return decode_log(rows, found)
        except ValueError as exc:
            raise CorruptStoreError(
                f"a stored event of agent {agent_id!r} of session {session_id!r} in {self.url} "
                f"cannot be read ({exc}); restore the database from a backup"
            ) from None

    def put_snapshot(self, session_id: str, agent_id: str, snapshot: Mapping[str, Any]) -> None:
        """Keep the agent's snapshot. See `SessionStore.put_snapshot`."""
        seq, text = encode_snapshot(session_id, agent_id, snapshot)
        new_blobs: dict[str, Blob] = {}
        text = externalize_text(text, new_blobs)
        params = {"session": session_id, "agent": agent_id, "seq": seq, "data": text}

        def work(conn: Connection) -> None:
            if not self._lock_session(conn, session_id):
                raise self._missing(session_id)
            self._holds.check_writer(conn, session_id)
            if conn.execute(self._sql.agent_exists, params).fetchone() is None:
                raise self._unknown_agent(session_id, agent_id)
            self._check_fence(conn, session_id, agent_id)
            conn.execute(self._sql.put_snapshot, params)
            blobs.put_blobs(conn, self._sql.s, session_id, new_blobs)

        self._open().run("writing a snapshot", work)

    def _session_data(self, session_id: str, data: object) -> dict[str, Any]:
        try:
            return decode_data(data)
        except ValueError as exc:
            raise CorruptStoreError(
                f"the data of session {session_id!r} in {self.url} cannot be read ({exc}); "
                "restore the database from a backup"
            ) from None

    def fork(
        self, session_id: str, new_session_id: str, *, at: int | None, root_agent_id: str
    ) -> None:
        """Fork the session just after its root's event ``at``. See `SessionStore.fork`.

        One transaction writes the new session, its agents and, per agent, a row of the
        ``forks`` table pointing at the prefix it shares: no event is copied.
        """
        check_fork_args(session_id, new_session_id, at)
        check_id("root_agent_id", root_agent_id)
        s = self._sql.s
        now = self._now()

        def work(conn: Connection) -> None:
            params = {"session": session_id}
            if not self._lock_session(conn, session_id):
                raise self._missing(session_id)
            head = conn.execute(
                f"SELECT root_agent_id, data FROM {s}.sessions WHERE session_id = %(session)s",
                params,
            ).fetchone()
            assert head is not None  # locked above
            self._lock_session(conn, new_session_id)
            self._holds.check_writer(conn, new_session_id)
            if conn.execute(self._sql.root_of, {"session": new_session_id}).fetchone():
                raise StoreError(
                    f"session {new_session_id!r} exists already in {self.url}; fork into a "
                    "new session id"
                )
            rows = conn.execute(self._sql.load_agents, params).fetchall()
            records = [AgentRecord(*row) for row in rows]
            lasts = forks.last_seqs(conn, s, session_id)
            planned = plan_fork(
                records,
                head[0],
                root_agent_id,
                at,
                lasts,
                lambda probes: forks.created_at_many(conn, s, session_id, probes),
            )
            data = fork_data(
                self._session_data(session_id, head[1]),
                session_id,
                at,
                head[0],
                root_agent_id,
                planned,
            )
            conn.execute(
                self._sql.create_session,
                {
                    "session": new_session_id,
                    "root": root_agent_id,
                    "data": encode_data("session data", data),
                    "now": now,
                },
            )
            forks.insert_agents(conn, s, new_session_id, planned, now)
            forks.insert_fork(conn, s, new_session_id, session_id, planned)

        self._open().run("forking a session", work)

    def list_sessions(self) -> list[SessionInfo]:
        """Every session, the most recently created first. See `SessionStore.list_sessions`."""
        rows = self._open().run(
            "listing sessions", lambda conn: conn.execute(self._sql.list_sessions).fetchall()
        )
        return [
            SessionInfo(
                session_id=session_id,
                root_agent_id=root,
                data=self._session_data(session_id, data),
                created_at=created_at,
                updated_at=updated_at,
                agent_count=agent_count,
                event_count=event_count,
            )
            for session_id, root, data, created_at, updated_at, agent_count, event_count in rows
        ]

    def delete(self, session_id: str) -> None:
        """Delete a session with its agents and events. See `SessionStore.delete`."""
        check_storable(session_id)

        def work(conn: Connection) -> None:
            if not self._lock_session(conn, session_id, share=False):
                raise self._missing(session_id)
            self._holds.check_writer(conn, session_id)
            forks.detach_forks(conn, self._sql.s, session_id)  # its forks keep their prefixes
            conn.execute(self._sql.delete, {"session": session_id})
            blobs.drop_refs(conn, self._sql.s, session_id)  # and the blobs no one refers to

        self._open().run("deleting a session", work)

    def last_seq(self, session_id: str, agent_id: str) -> int:
        """The agent's highest stored seq, -1 when none. See `SessionStore.last_seq`."""
        check_storable(session_id, agent_id)
        params = {"session": session_id, "agent": agent_id}
        row = self._open().run(
            "reading the last seq", lambda conn: conn.execute(self._sql.last_seq, params).fetchone()
        )
        if row is None:
            raise self._missing(session_id)
        return -1 if row[0] is None else int(row[0])

    # -- shared budgets (`BudgetStore`) ------------------------------------------------------

    def reserve_budget(
        self, budget: str, hold: str, amount: Counts, caps: Caps
    ) -> BudgetTotals | None:
        """Hold ``amount`` on ``budget`` if it fits. See `BudgetStore.reserve_budget`."""
        check_reservation(budget, hold, amount, caps)
        s = self._sql.s
        return self._open().run(
            "reserving on a budget",
            lambda conn: budgets.reserve(conn, s, budget, hold, amount, caps),
            single=True,  # one statement; the totals a refusal reads are for its message
        )

    def settle_budget(self, budget: str, hold: str, spent: Counts) -> bool:
        """End a hold, counting ``spent``. See `BudgetStore.settle_budget`."""
        check_settlement(budget, hold, spent)
        s = self._sql.s
        return self._open().run(
            "settling a budget's hold",
            lambda conn: budgets.settle(conn, s, budget, hold, spent),
            single=True,
        )

    def read_budget(self, budget: str) -> BudgetTotals:
        """The budget's totals. See `BudgetStore.read_budget`."""
        check_id("budget", budget)
        s = self._sql.s
        return self._open().run(
            "reading a budget", lambda conn: budgets.read(conn, s, budget), single=True
        )

    # -- ownership --------------------------------------------------------------------------

    def fence(self, session_id: str, agent_ids: Sequence[str] | None = None) -> int:
        """Make this instance the only writer of agents of a session; their new epoch.

        See `actors.store._fences.fence`. It waits for the writes in flight to the session
        (it locks the session's row as `acquire` does), so none of them lands after it.
        """
        check_storable(session_id)
        ids = check_fence_ids(agent_ids)
        token = self._holds.holder.token

        def work(conn: Connection) -> int:
            if not self._lock_session(conn, session_id, share=False):
                raise self._missing(session_id)
            self._holds.check_writer(conn, session_id)
            params: dict[str, Any] = {"session": session_id, "token": token}
            known = [row[0] for row in conn.execute(self._sql.agent_ids, params)]
            chosen = known if ids is None else ids
            missing = sorted(set(chosen) - set(known))
            if missing:
                raise StoreError(
                    f"cannot fence agents {missing} of session {session_id!r} in {self.url}: "
                    "they are not part of it; put_agent() them first"
                )
            (top,) = conn.execute(self._sql.top_epoch, params).fetchone() or (None,)
            epoch = (0 if top is None else int(top)) + 1
            conn.execute(self._sql.set_fences, {**params, "epoch": epoch, "agents": chosen})
            return epoch

        epoch: int = self._open().run("fencing agents", work)
        return epoch

    def acquire(self, session_id: str) -> None:
        """Make this store the session's only writer. See `SessionStore.acquire`."""
        check_id("session_id", session_id)
        holds = self._holds
        self._open().owned(
            "acquiring a session", lambda conn: holds.acquire(conn, session_id), holds.rearm
        )

    def release(self, session_id: str) -> None:
        """Stop holding the session. Idempotent. See `SessionStore.release`."""
        check_storable(session_id)
        link, holds = self._link, self._holds
        if link is not None and session_id in holds.held:
            link.owned(
                "releasing a session", lambda conn: holds.release(conn, session_id), holds.rearm
            )

    def close(self) -> None:
        """Release every session held and close every connection. Idempotent."""
        with self._lock:
            link, self._link = self._link, None
        if link is None:
            return
        try:
            link.close(self._holds.release_all)
        finally:
            self._holds.held.clear()
            close_holder(self._holds.holder)
