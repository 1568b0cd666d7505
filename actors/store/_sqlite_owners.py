"""Session ownership in an SQLite store file: the ``owners`` table.

A row names the store instance that holds a session: its host, pid, process start token and
instance token. The row is only a claim: a holder whose process has ended (same host, pid
gone or reused) holds nothing, so its row is overwritten by the next `claim`. Every function
runs inside the caller's write transaction (``BEGIN IMMEDIATE``), which serialises claims and
writes across processes.
"""

from __future__ import annotations

import sqlite3

from actors.store._owner import Holder, busy, holder_alive

__all__ = ["check_writer", "claim", "create_owners", "release", "release_all"]


def create_owners(conn: sqlite3.Connection) -> None:
    """Migration 1 -> 2: the ``owners`` table."""
    conn.execute(
        """
        CREATE TABLE owners (
            session_id  TEXT PRIMARY KEY NOT NULL,
            host        TEXT NOT NULL,
            pid         INTEGER NOT NULL,
            started     TEXT NOT NULL,
            token       TEXT NOT NULL,
            acquired_at TEXT NOT NULL
        ) WITHOUT ROWID
        """
    )


def _holder(conn: sqlite3.Connection, session_id: str) -> Holder | None:
    row = conn.execute(
        "SELECT host, pid, started, token FROM owners WHERE session_id = ?", (session_id,)
    ).fetchone()
    return None if row is None else Holder(*row)


def check_writer(conn: sqlite3.Connection, session_id: str, me: Holder, where: str) -> None:
    """Raise `SessionBusyError` when another live store holds ``session_id``."""
    holder = _holder(conn, session_id)
    if holder is not None and holder.token != me.token and holder_alive(holder):
        raise busy(session_id, holder.host, holder.pid, where)


def claim(conn: sqlite3.Connection, session_id: str, me: Holder, now: str, where: str) -> None:
    """Record ``me`` as the holder of ``session_id`` unless another live store holds it."""
    check_writer(conn, session_id, me, where)
    conn.execute(
        "INSERT OR REPLACE INTO owners (session_id, host, pid, started, token, acquired_at)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (session_id, me.host, me.pid, me.started, me.token, now),
    )


def release(conn: sqlite3.Connection, session_id: str, me: Holder) -> None:
    """Drop ``me``'s claim on ``session_id`` (never another store's)."""
    conn.execute("DELETE FROM owners WHERE session_id = ? AND token = ?", (session_id, me.token))


def release_all(conn: sqlite3.Connection, me: Holder) -> None:
    """Drop every claim of ``me``."""
    conn.execute("DELETE FROM owners WHERE token = ?", (me.token,))
