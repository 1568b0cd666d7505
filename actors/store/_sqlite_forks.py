"""Forks in an SQLite store file: prefixes shared by reference, read through, kept on delete.

Version 4 of the schema adds the ``forks`` table: one row per agent of a fork, pointing at
the agent of the session it was forked from and at the seq its shared prefix stops before.
The fork's own rows in ``events`` start at that seq; reading its log reads the prefix from
the original (which may itself be a fork: the chain is followed), then its own rows. Deleting
a session first copies, into each fork that points at it, the rows of the prefix it shares,
and points the fork at whatever the deleted session pointed at: the fork stays whole.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from actors.store._fork import ForkedAgent
from actors.store._sqlite_blobs import copy_refs

__all__ = [
    "create_forks",
    "detach_forks",
    "event_created_at",
    "has_forks",
    "insert_fork",
    "prefix_last",
    "segments",
]

_NO_END = 2**63 - 1


def create_forks(conn: sqlite3.Connection) -> None:
    """Migration to version 4: the ``forks`` table (self-contained: touches no other table)."""
    conn.execute(
        """
        CREATE TABLE forks (
            session_id   TEXT NOT NULL,
            agent_id     TEXT NOT NULL,
            base_session TEXT NOT NULL,
            base_agent   TEXT NOT NULL,
            upto         INTEGER NOT NULL,
            PRIMARY KEY (session_id, agent_id),
            FOREIGN KEY (session_id, agent_id)
                REFERENCES agents (session_id, agent_id) ON DELETE CASCADE
        )
        """
    )
    conn.execute("CREATE INDEX forks_base ON forks (base_session)")


def has_forks(conn: sqlite3.Connection, session_id: str) -> bool:
    """Whether any agent of the session reads a prefix through."""
    row = conn.execute("SELECT 1 FROM forks WHERE session_id = ? LIMIT 1", (session_id,))
    return row.fetchone() is not None


def _base(conn: sqlite3.Connection, session_id: str, agent_id: str) -> tuple[str, str, int] | None:
    row = conn.execute(
        "SELECT base_session, base_agent, upto FROM forks WHERE session_id = ? AND agent_id = ?",
        (session_id, agent_id),
    ).fetchone()
    return None if row is None else (row[0], row[1], int(row[2]))


def segments(
    conn: sqlite3.Connection, session_id: str, agent_id: str, stop: int = _NO_END
) -> list[tuple[str, str, int]]:
    """Where the agent's events with ``seq < stop`` are stored, in seq order.

    Each ``(session, agent, stop)``: that agent's own rows below ``stop``. The first ones are
    the shared prefix (followed through forks of forks), the last the agent's own rows.
    """
    chain: list[tuple[str, str, int]] = [(session_id, agent_id, stop)]
    base = _base(conn, session_id, agent_id)
    while base is not None:
        stop = min(stop, base[2])
        chain.append((base[0], base[1], stop))
        base = _base(conn, base[0], base[1])
    chain.reverse()
    return chain


def prefix_last(conn: sqlite3.Connection, session_id: str, agent_id: str) -> int:
    """The last seq of the prefix the agent shares (-1 when it shares none)."""
    base = _base(conn, session_id, agent_id)
    return -1 if base is None else base[2] - 1


def event_created_at(conn: sqlite3.Connection, session_id: str, agent_id: str, seq: int) -> str:
    """The stored timestamp of the agent's event at ``seq``, read through a shared prefix."""
    for where, agent, stop in segments(conn, session_id, agent_id):
        if seq < stop:
            row = conn.execute(
                "SELECT created_at FROM events WHERE session_id = ? AND agent_id = ? AND seq = ?",
                (where, agent, seq),
            ).fetchone()
            if row is not None:
                return str(row[0])
    raise KeyError(f"no event {seq} of agent {agent_id!r} in session {session_id!r}")


def insert_fork(
    conn: sqlite3.Connection, session_id: str, source_id: str, planned: Sequence[ForkedAgent]
) -> None:
    """Point each agent of the new fork at its prefix of the original's log."""
    conn.executemany(
        "INSERT INTO forks (session_id, agent_id, base_session, base_agent, upto)"
        " VALUES (?, ?, ?, ?, ?)",
        [
            (session_id, a.record.agent_id, source_id, a.source_id, a.upto)
            for a in planned
            if a.upto > 0
        ],
    )


def detach_forks(conn: sqlite3.Connection, session_id: str) -> None:
    """Before the session is deleted: copy into every fork of it the rows it shares.

    The fork's logical log does not change: only where its prefix is stored. Each fork takes
    over the session's blob references too, so the blobs of the prefix stay.
    """
    rows = conn.execute(
        "SELECT session_id, agent_id, base_agent, upto FROM forks WHERE base_session = ?",
        (session_id,),
    ).fetchall()
    for fork_session in sorted({row[0] for row in rows}):
        copy_refs(conn, session_id, fork_session)
    for fork_session, fork_agent, base_agent, upto in rows:
        conn.execute(
            "INSERT INTO events (session_id, agent_id, seq, type, data, created_at)"
            " SELECT ?, ?, seq, type, data, created_at FROM events"
            " WHERE session_id = ? AND agent_id = ? AND seq < ?",
            (fork_session, fork_agent, session_id, base_agent, upto),
        )
        further = _base(conn, session_id, base_agent)
        if further is None:
            conn.execute(
                "DELETE FROM forks WHERE session_id = ? AND agent_id = ?",
                (fork_session, fork_agent),
            )
        else:
            conn.execute(
                "UPDATE forks SET base_session = ?, base_agent = ?, upto = ?"
                " WHERE session_id = ? AND agent_id = ?",
                (further[0], further[1], min(int(upto), further[2]), fork_session, fork_agent),
            )
