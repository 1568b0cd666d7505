"""Fences in an SQLite store file: the ``fences`` table (see `actors.store._fences`).

A row names the one store instance (its holder token) that may write an agent, and the epoch
it took the agent over at. Every function runs inside the caller's write transaction
(``BEGIN IMMEDIATE``), which serialises fences and writes across processes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from actors.exceptions import StoreError
from actors.store._fences import fenced

__all__ = ["check_fence", "create_fences", "take_over"]


def create_fences(conn: sqlite3.Connection) -> None:
    """Migration to version 5: the ``fences`` table (self-contained: touches no other table)."""
    conn.execute(
        """
        CREATE TABLE fences (
            session_id TEXT NOT NULL,
            agent_id   TEXT NOT NULL,
            epoch      INTEGER NOT NULL,
            token      TEXT NOT NULL,
            PRIMARY KEY (session_id, agent_id),
            FOREIGN KEY (session_id, agent_id)
                REFERENCES agents (session_id, agent_id) ON DELETE CASCADE
        ) WITHOUT ROWID
        """
    )


def check_fence(
    conn: sqlite3.Connection, session_id: str, agent_id: str, token: str, where: str
) -> None:
    """Raise `FencedWriteError` when another instance fenced the agent."""
    row = conn.execute(
        "SELECT epoch, token FROM fences WHERE session_id = ? AND agent_id = ?",
        (session_id, agent_id),
    ).fetchone()
    if row is not None and row[1] != token:
        raise fenced(session_id, agent_id, int(row[0]), where)


def take_over(
    conn: sqlite3.Connection,
    session_id: str,
    agent_ids: Sequence[str] | None,
    token: str,
    where: str,
) -> int:
    """Fence the agents (every agent of the session, for None) for ``token``: the new epoch."""
    known = [
        row[0]
        for row in conn.execute("SELECT agent_id FROM agents WHERE session_id = ?", (session_id,))
    ]
    if agent_ids is None:
        chosen = known
    else:
        missing = sorted(set(agent_ids) - set(known))
        if missing:
            raise StoreError(
                f"cannot fence agents {missing} of session {session_id!r} in {where}: they are "
                "not part of it; put_agent() them first"
            )
        chosen = list(agent_ids)
    (top,) = conn.execute(
        "SELECT MAX(epoch) FROM fences WHERE session_id = ?", (session_id,)
    ).fetchone()
    epoch = (0 if top is None else int(top)) + 1
    conn.executemany(
        "INSERT INTO fences (session_id, agent_id, epoch, token) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (session_id, agent_id) DO UPDATE SET epoch = excluded.epoch,"
        " token = excluded.token",
        [(session_id, agent_id, epoch, token) for agent_id in chosen],
    )
    return epoch
