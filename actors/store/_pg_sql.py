"""The SQL of a Postgres session store: its tables, its migrations and its statements.

Every table lives in one Postgres schema (``actors`` by default), named in every statement, so
the store never depends on the connection's ``search_path``. Payloads are kept as JSON text,
byte for byte as encoded, like the SQLite store does; cast to ``jsonb`` to query them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final

from actors.exceptions import UserError

__all__ = [
    "BUDGET_COUNTERS",
    "SCHEMA_VERSION",
    "Statements",
    "lock_key",
    "migrations",
    "quote_ident",
]


def quote_ident(name: str) -> str:
    """``name`` as a quoted SQL identifier.

    Raises:
        UserError: An empty name, one longer than Postgres keeps (63 bytes), or one with NUL.
    """
    if (
        not isinstance(name, str)
        or not name
        or "\x00" in name
        or "$" in name  # it would end the dollar-quoted body of the append function
        or len(name.encode()) > 63
    ):
        raise UserError(
            "schema must be a non-empty Postgres identifier of at most 63 bytes, without NUL or "
            f"'$', got {name!r}"
        )
    return '"' + name.replace('"', '""') + '"'


def lock_key(schema: str, session_id: str) -> int:
    """The advisory-lock key (a signed 64-bit integer) of a session in ``schema``."""
    digest = hashlib.blake2b(f"{schema}\x00{session_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _alive(key: str) -> str:
    """Whether the owner row ``o`` is backed by the advisory lock ``key`` held by its backend.

    True while the holder's owner connection lives: ``pg_locks`` shows the locks held now, not
    as of a snapshot.
    """
    return f"""EXISTS (
    SELECT 1 FROM pg_catalog.pg_locks AS l
    WHERE l.locktype = 'advisory' AND l.granted AND l.pid = o.backend_pid
      AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())
      AND l.classid = (({key} >> 32) & 4294967295)::oid
      AND l.objid = ({key} & 4294967295)::oid
      AND l.objsubid = 1
)"""


_ALIVE = _alive("%(key)s::bigint")


def migrations(schema: str) -> list[list[str]]:
    """``migrations(s)[n]``: the statements that turn schema version ``n`` into ``n + 1``.

    Version 0 is a missing schema (or one without the version table), so the first migration
    creates everything.
    """
    s = quote_ident(schema)
    create_v1 = [
        f"CREATE SCHEMA IF NOT EXISTS {s}",
        f"CREATE TABLE {s}.schema_version (version integer NOT NULL)",
        f"INSERT INTO {s}.schema_version (version) VALUES (0)",
        f"""
        CREATE TABLE {s}.sessions (
            session_id    text PRIMARY KEY,
            root_agent_id text NOT NULL,
            data          text NOT NULL,
            created_at    timestamptz NOT NULL,
            updated_at    timestamptz NOT NULL,
            ordinal       bigint GENERATED ALWAYS AS IDENTITY UNIQUE
        )
        """,
        f"""
        CREATE TABLE {s}.agents (
            session_id text NOT NULL REFERENCES {s}.sessions ON DELETE CASCADE,
            agent_id   text NOT NULL,
            parent_id  text,
            name       text NOT NULL,
            status     text NOT NULL,
            position   bigint NOT NULL,
            ordinal    bigint GENERATED ALWAYS AS IDENTITY,
            -- per agent, not per session: agents of one session append in parallel
            event_count bigint NOT NULL DEFAULT 0,
            updated_at  timestamptz NOT NULL,
            PRIMARY KEY (session_id, agent_id)
        )
        """,
        f"""
        CREATE TABLE {s}.events (
            session_id text NOT NULL,
            agent_id   text NOT NULL,
            seq        bigint NOT NULL,
            type       text NOT NULL,
            data       text NOT NULL,
            created_at text NOT NULL,
            PRIMARY KEY (session_id, agent_id, seq),
            FOREIGN KEY (session_id, agent_id) REFERENCES {s}.agents ON DELETE CASCADE
        )
        """,
        # Who holds a session: the row names the holder; the advisory lock that its owner
        # connection (backend_pid) holds proves it is alive. No foreign key: a session may be
        # held before it exists.
        f"""
        CREATE TABLE {s}.owners (
            session_id  text PRIMARY KEY,
            host        text NOT NULL,
            pid         integer NOT NULL,
            token       text NOT NULL,
            backend_pid integer NOT NULL,
            acquired_at timestamptz NOT NULL
        )
        """,
        _append_function(s),
    ]
    # Version 2: one snapshot of the folded context per agent (`SessionStore.put_snapshot`).
    snapshots_v2 = [
        f"""
        CREATE TABLE {s}.snapshots (
            session_id text NOT NULL,
            agent_id   text NOT NULL,
            seq        bigint NOT NULL,
            data       text NOT NULL,
            PRIMARY KEY (session_id, agent_id),
            FOREIGN KEY (session_id, agent_id) REFERENCES {s}.agents ON DELETE CASCADE
        )
        """,
    ]
    # Version 3: forks share a prefix of another session's logs by reference (see
    # `_pg_forks`); the append function learns that a fork's log goes on after its prefix.
    forks_v3 = [
        f"""
        CREATE TABLE {s}.forks (
            session_id   text NOT NULL,
            agent_id     text NOT NULL,
            base_session text NOT NULL,
            base_agent   text NOT NULL,
            upto         bigint NOT NULL,
            PRIMARY KEY (session_id, agent_id),
            FOREIGN KEY (session_id, agent_id) REFERENCES {s}.agents ON DELETE CASCADE
        )
        """,
        f"CREATE INDEX forks_base ON {s}.forks (base_session)",
        _append_function(s, forks=True),
    ]
    # Version 4: budgets shared by processes (`BudgetStore`, see `_pg_budgets`).
    # Version 5: binary parts of messages kept once, by hash, outside the events (`_pg_blobs`).
    blobs_v5 = [
        f"""
        CREATE TABLE {s}.blobs (
            hash       text PRIMARY KEY,
            media_type text NOT NULL,
            size       bigint NOT NULL,
            data       text NOT NULL
        )
        """,
        f"""
        CREATE TABLE {s}.blob_refs (
            session_id text NOT NULL,
            hash       text NOT NULL,
            PRIMARY KEY (session_id, hash)
        )
        """,
        f"CREATE INDEX blob_refs_hash ON {s}.blob_refs (hash)",
    ]
    # Version 6: fences (see `actors.store._fences`): the one store instance that may write an
    # agent, by its token; the append function refuses a batch from any other.
    fences_v6 = [
        f"""
        CREATE TABLE {s}.fences (
            session_id text NOT NULL,
            agent_id   text NOT NULL,
            epoch      bigint NOT NULL,
            token      text NOT NULL,
            PRIMARY KEY (session_id, agent_id),
            FOREIGN KEY (session_id, agent_id) REFERENCES {s}.agents ON DELETE CASCADE
        )
        """,
        _append_function(s, forks=True, fences=True),
    ]
    return [create_v1, snapshots_v2, forks_v3, _budget_tables(s), blobs_v5, fences_v6]


def _append_function(s: str, *, forks: bool = False, fences: bool = False) -> str:
    """A batch append in one statement, so one round trip, for the common case.

    It appends when the batch continues the stored log and nobody else holds the session, and
    otherwise changes nothing and says why (``missing``, ``busy``, ``unknown agent``, or
    ``not next`` with the stored last seq, for the store to sort out: a re-append or a gap;
    ``fenced`` with the fence's epoch in ``stored_last``: another instance fenced the agent).
    Each statement in it takes a new snapshot, so the claim check after the lock sees every
    claim committed before the lock was granted.
    """
    prefix = (
        f"stored_last := GREATEST(stored_last, (SELECT upto - 1 FROM {s}.forks"
        " WHERE session_id = p_session AND agent_id = p_agent));"
        if forks
        else ""
    )
    fence = (
        f"SELECT f.epoch INTO stored_last FROM {s}.fences AS f"
        " WHERE f.session_id = p_session AND f.agent_id = p_agent AND f.token <> p_token;"
        " IF FOUND THEN status := 'fenced'; RETURN; END IF;"
        if fences
        else ""
    )
    return f"""
    CREATE OR REPLACE FUNCTION {s}.append_batch(
        p_session text, p_agent text, p_token text, p_key bigint, p_seqs bigint[],
        p_types text[], p_datas text[], p_times text[], p_now timestamptz,
        OUT status text, OUT stored_last bigint, OUT holder_host text, OUT holder_pid integer
    ) LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $append$
    BEGIN
        PERFORM 1 FROM {s}.sessions WHERE session_id = p_session FOR KEY SHARE;
        IF NOT FOUND THEN
            status := 'missing';
            RETURN;
        END IF;
        SELECT o.host, o.pid INTO holder_host, holder_pid FROM {s}.owners AS o
        WHERE o.session_id = p_session AND o.token <> p_token AND {_alive("p_key")};
        IF FOUND THEN
            status := 'busy';
            RETURN;
        END IF;
        PERFORM 1 FROM {s}.agents WHERE session_id = p_session AND agent_id = p_agent;
        IF NOT FOUND THEN
            status := 'unknown agent';
            RETURN;
        END IF;
        {fence}
        stored_last := coalesce((SELECT seq FROM {s}.events
            WHERE session_id = p_session AND agent_id = p_agent ORDER BY seq DESC LIMIT 1), -1);
        {prefix}
        IF p_seqs[1] <> stored_last + 1 THEN
            status := 'not next';
            RETURN;
        END IF;
        INSERT INTO {s}.events (session_id, agent_id, seq, type, data, created_at)
        SELECT p_session, p_agent, e.seq, e.type, e.data, e.created_at
        FROM unnest(p_seqs, p_types, p_datas, p_times) AS e (seq, type, data, created_at);
        UPDATE {s}.agents SET updated_at = p_now,
            event_count = event_count + cardinality(p_seqs)
        WHERE session_id = p_session AND agent_id = p_agent;
        status := 'appended';
    END
    $append$
    """


BUDGET_COUNTERS: Final = ("requests", "input_tokens", "output_tokens", "nano_usd")
"""The counters of a shared budget's row, each spent and reserved (see `_pg_budgets`)."""


def _budget_tables(s: str) -> list[str]:
    """Migration 3 -> 4 of schema ``s`` (quoted): the budget tables."""
    spent = ", ".join(f"spent_{name} bigint NOT NULL DEFAULT 0" for name in BUDGET_COUNTERS)
    reserved = ", ".join(f"reserved_{name} bigint NOT NULL DEFAULT 0" for name in BUDGET_COUNTERS)
    held = ", ".join(f"{name} bigint NOT NULL" for name in BUDGET_COUNTERS)
    return [
        f"CREATE TABLE {s}.budgets (budget text PRIMARY KEY, {spent}, {reserved})",
        f"CREATE TABLE {s}.budget_holds (budget text NOT NULL, hold text NOT NULL, {held},"
        " PRIMARY KEY (budget, hold))",
    ]


SCHEMA_VERSION: Final = len(migrations("actors"))
"""The schema version this library writes."""


@dataclass(frozen=True, slots=True)
class Statements:
    """Every statement of the store, for one schema.

    Parameters are named (``%(session)s``); the ones that check who holds a session take
    ``session``, ``token`` (this store's) and ``key`` (`lock_key` of the session).
    """

    schema: str

    @property
    def s(self) -> str:
        """The quoted schema name."""
        return quote_ident(self.schema)

    def _last(self, session: str, agent: str) -> str:
        # Not MAX(seq): the planner may aggregate the whole log when its statistics are new;
        # a backward scan of the primary key reads one entry. A fork's log goes on after the
        # prefix it shares (GREATEST ignores NULLs).
        return (
            f"SELECT GREATEST((SELECT seq FROM {self.s}.events WHERE session_id = {session}"
            f" AND agent_id = {agent} ORDER BY seq DESC LIMIT 1),"
            f" (SELECT upto - 1 FROM {self.s}.forks WHERE session_id = {session}"
            f" AND agent_id = {agent}))"
        )

    # -- schema ---------------------------------------------------------------------------

    @property
    def tables(self) -> str:
        """The tables of the schema, and whether it holds a version table."""
        return (
            "SELECT c.relname FROM pg_catalog.pg_class AS c"
            " JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %(schema)s AND c.relkind IN ('r', 'p', 'v', 'm', 'f')"
        )

    @property
    def version(self) -> str:
        """The schema version."""
        return f"SELECT version FROM {self.s}.schema_version"

    @property
    def set_version(self) -> str:
        """Record the schema version."""
        return f"UPDATE {self.s}.schema_version SET version = %(version)s"

    # -- ownership --------------------------------------------------------------------------

    @property
    def share_session(self) -> str:
        """A writer's lock on a session's row: writers share it, an acquirer waits for them."""
        return f"SELECT 1 FROM {self.s}.sessions WHERE session_id = %(session)s FOR KEY SHARE"

    @property
    def lock_session(self) -> str:
        """An acquirer's (or a delete's) lock on a session's row: it waits for every writer."""
        return f"SELECT 1 FROM {self.s}.sessions WHERE session_id = %(session)s FOR UPDATE"

    @property
    def busy_holder(self) -> str:
        """Host and pid of another live store that holds the session; no row when none does."""
        return (
            f"SELECT o.host, o.pid FROM {self.s}.owners AS o"
            f" WHERE o.session_id = %(session)s AND o.token <> %(token)s AND {_ALIVE}"
        )

    @property
    def holder(self) -> str:
        """Host and pid recorded for the session's holder (live or not)."""
        return f"SELECT host, pid FROM {self.s}.owners WHERE session_id = %(session)s"

    @property
    def claim(self) -> str:
        """Record this store as the holder unless another live store is; a row when it is."""
        return (
            f"INSERT INTO {self.s}.owners AS o"
            " (session_id, host, pid, token, backend_pid, acquired_at)"
            " VALUES (%(session)s, %(host)s, %(pid)s, %(token)s, pg_backend_pid(), now())"
            " ON CONFLICT (session_id) DO UPDATE SET host = excluded.host, pid = excluded.pid,"
            " token = excluded.token, backend_pid = excluded.backend_pid,"
            " acquired_at = excluded.acquired_at"
            f" WHERE o.token = excluded.token OR NOT {_ALIVE}"
            " RETURNING 1"
        )

    @property
    def try_lock(self) -> str:
        """Take the session's advisory lock on this connection, without waiting."""
        return "SELECT pg_catalog.pg_try_advisory_lock(%(key)s::bigint)"

    @property
    def unlock(self) -> str:
        """Give the session's advisory lock back."""
        return "SELECT pg_catalog.pg_advisory_unlock(%(key)s::bigint)"

    @property
    def disown(self) -> str:
        """Drop this store's claim on a session."""
        return f"DELETE FROM {self.s}.owners WHERE session_id = %(session)s AND token = %(token)s"

    @property
    def disown_all(self) -> str:
        """Drop every claim of this store."""
        return f"DELETE FROM {self.s}.owners WHERE token = %(token)s"

    # -- fences -----------------------------------------------------------------------------

    @property
    def other_fence(self) -> str:
        """The epoch of the agent's fence if another instance holds it; no row otherwise."""
        return (
            f"SELECT epoch FROM {self.s}.fences WHERE session_id = %(session)s"
            " AND agent_id = %(agent)s AND token <> %(token)s"
        )

    @property
    def agent_ids(self) -> str:
        """The ids of a session's agents."""
        return f"SELECT agent_id FROM {self.s}.agents WHERE session_id = %(session)s"

    @property
    def top_epoch(self) -> str:
        """The highest epoch of a session's fences (NULL when none)."""
        return f"SELECT MAX(epoch) FROM {self.s}.fences WHERE session_id = %(session)s"

    @property
    def set_fences(self) -> str:
        """Fence agents (an array) at an epoch for a token."""
        return (
            f"INSERT INTO {self.s}.fences (session_id, agent_id, epoch, token)"
            " SELECT %(session)s, a, %(epoch)s, %(token)s FROM unnest(%(agents)s::text[]) AS a"
            " ON CONFLICT (session_id, agent_id) DO UPDATE SET epoch = excluded.epoch,"
            " token = excluded.token"
        )

    # -- sessions and agents ---------------------------------------------------------------

    @property
    def root_of(self) -> str:
        """The root agent of a session."""
        return f"SELECT root_agent_id FROM {self.s}.sessions WHERE session_id = %(session)s"

    @property
    def create_session(self) -> str:
        """Insert a session unless it exists."""
        return (
            f"INSERT INTO {self.s}.sessions"
            " (session_id, root_agent_id, data, created_at, updated_at)"
            " VALUES (%(session)s, %(root)s, %(data)s, %(now)s, %(now)s)"
            " ON CONFLICT (session_id) DO NOTHING"
        )

    @property
    def put_agent(self) -> str:
        """Insert an agent or update its record."""
        return (
            f"INSERT INTO {self.s}.agents"
            " (session_id, agent_id, parent_id, name, status, position, updated_at)"
            " VALUES (%(session)s, %(agent)s, %(parent)s, %(name)s, %(status)s, %(position)s,"
            " %(now)s) ON CONFLICT (session_id, agent_id) DO UPDATE SET"
            " parent_id = excluded.parent_id, name = excluded.name, status = excluded.status,"
            " position = excluded.position, updated_at = excluded.updated_at"
        )

    @property
    def delete(self) -> str:
        """Delete a session; its agents and events go with it (foreign keys cascade)."""
        return f"DELETE FROM {self.s}.sessions WHERE session_id = %(session)s"

    # -- events ---------------------------------------------------------------------------

    @property
    def append_head(self) -> str:
        """Whether the agent was put, its highest seq (NULL when none), and a busy holder.

        One row: the holder's host and pid are NULL unless another live store holds the session.
        """
        return (
            f"SELECT EXISTS (SELECT 1 FROM {self.s}.agents"
            " WHERE session_id = %(session)s AND agent_id = %(agent)s),"
            f" ({self._last('%(session)s', '%(agent)s')}),"
            f" b.host, b.pid FROM (SELECT 1) AS one LEFT JOIN ({self.busy_holder}) AS b ON true"
        )

    @property
    def append_batch(self) -> str:
        """Append a batch in one statement (see the ``append_batch`` function)."""
        return (
            f"SELECT status, stored_last, holder_host, holder_pid FROM {self.s}.append_batch("
            "%(session)s, %(agent)s, %(token)s, %(key)s, %(seqs)b::bigint[], %(types)b::text[],"
            " %(datas)b::text[], %(times)b::text[], %(now)s)"
        )

    @property
    def insert_events(self) -> str:
        """Insert a batch of one agent's events (parallel arrays) and count them: one statement."""
        return (
            f"WITH inserted AS (INSERT INTO {self.s}.events"
            " (session_id, agent_id, seq, type, data, created_at)"
            " SELECT %(session)s, %(agent)s, e.seq, e.type, e.data, e.created_at"
            " FROM unnest(%(seqs)b::bigint[], %(types)b::text[], %(datas)b::text[],"
            " %(times)b::text[]) AS e (seq, type, data, created_at))"
            f" UPDATE {self.s}.agents SET updated_at = %(now)s,"
            " event_count = event_count + %(added)s"
            " WHERE session_id = %(session)s AND agent_id = %(agent)s"
        )

    @property
    def last_seq(self) -> str:
        """A session's existence, and an agent's highest seq in it."""
        return (
            f"SELECT ({self._last('s.session_id', '%(agent)s')})"
            f" FROM {self.s}.sessions AS s WHERE s.session_id = %(session)s"
        )

    # -- loading and listing ----------------------------------------------------------------

    @property
    def load_head(self) -> str:
        """A session's root, data and timestamps."""
        return (
            "SELECT s.root_agent_id, s.data, s.created_at,"
            f" GREATEST(s.updated_at, (SELECT MAX(a.updated_at) FROM {self.s}.agents AS a"
            f" WHERE a.session_id = s.session_id)) FROM {self.s}.sessions AS s"
            " WHERE s.session_id = %(session)s"
        )

    @property
    def load_agents(self) -> str:
        """A session's agents in spawn order."""
        return (
            f"SELECT agent_id, parent_id, name, status, position FROM {self.s}.agents"
            " WHERE session_id = %(session)s ORDER BY position, ordinal"
        )

    @property
    def load_events(self) -> str:
        """A session's events, agent by agent, in seq order."""
        return (
            f"SELECT agent_id, seq, type, data, created_at FROM {self.s}.events"
            " WHERE session_id = %(session)s ORDER BY agent_id, seq"
        )

    @property
    def load_snapshots(self) -> str:
        """A session's snapshots."""
        return f"SELECT agent_id, seq, data FROM {self.s}.snapshots WHERE session_id = %(session)s"

    @property
    def load_events_of(self) -> str:
        """The events of some agents of a session, agent by agent, in seq order."""
        return (
            f"SELECT agent_id, seq, type, data, created_at FROM {self.s}.events"
            " WHERE session_id = %(session)s AND agent_id = ANY(%(agents)s::text[])"
            " ORDER BY agent_id, seq"
        )

    @property
    def read_events(self) -> str:
        """An agent's events between two seqs (a range of the primary key)."""
        return (
            "SELECT e.seq, e.type, e.data, e.created_at"
            f" FROM {self.s}.events AS e WHERE e.session_id = %(session)s"
            " AND e.agent_id = %(agent)s AND e.seq >= %(start)s AND e.seq < %(stop)s"
            " ORDER BY e.seq"
        )

    @property
    def agent_exists(self) -> str:
        """Whether an agent was put."""
        return (
            f"SELECT 1 FROM {self.s}.agents WHERE session_id = %(session)s AND agent_id = %(agent)s"
        )

    @property
    def put_snapshot(self) -> str:
        """Insert or replace an agent's snapshot."""
        return (
            f"INSERT INTO {self.s}.snapshots (session_id, agent_id, seq, data)"
            " VALUES (%(session)s, %(agent)s, %(seq)s, %(data)s)"
            " ON CONFLICT (session_id, agent_id) DO UPDATE SET seq = excluded.seq,"
            " data = excluded.data"
        )

    @property
    def list_sessions(self) -> str:
        """Every session with its counts, the most recently created first."""
        return (
            "SELECT s.session_id, s.root_agent_id, s.data, s.created_at,"
            " GREATEST(s.updated_at, MAX(a.updated_at)), COUNT(a.agent_id),"
            f" COALESCE(SUM(a.event_count), 0) FROM {self.s}.sessions AS s"
            f" LEFT JOIN {self.s}.agents AS a ON a.session_id = s.session_id"
            " GROUP BY s.session_id ORDER BY s.ordinal DESC"
        )
