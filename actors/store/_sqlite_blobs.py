"""Blobs in an SQLite store file: binary parts kept once, by hash, and swept on delete.

Version 5 of the schema adds two tables. ``blobs`` holds each part's content once (hash,
media type, size, base64 text); ``blob_refs`` says which session refers to which blob: a
row per (session, blob), written with the events (or snapshot) that refer to it, in the
same transaction. Deleting a session deletes its rows of ``blob_refs`` and then the blobs no
session refers to any more. A fork shares the blobs of the prefix it reads through; when the
session it was forked from is deleted, the fork takes over that session's references
(`copy_refs`, with the rows of the prefix), so its blobs stay. Pure SQL; what goes in and
comes out is `actors.store._blobs`'s.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping

from actors.store._blobs import Blob

__all__ = ["copy_refs", "create_blobs", "drop_refs", "fetch", "put_blobs"]

_CHUNK = 500  # bound parameters per statement, well below SQLite's limit


def create_blobs(conn: sqlite3.Connection) -> None:
    """Migration to version 5: the ``blobs`` and ``blob_refs`` tables (touches no other)."""
    conn.execute(
        """
        CREATE TABLE blobs (
            hash       TEXT PRIMARY KEY NOT NULL,
            media_type TEXT NOT NULL,
            size       INTEGER NOT NULL,
            data       TEXT NOT NULL
        )
        """
    )
    conn.execute(
        """
        CREATE TABLE blob_refs (
            session_id TEXT NOT NULL,
            hash       TEXT NOT NULL,
            PRIMARY KEY (session_id, hash)
        ) WITHOUT ROWID
        """
    )
    conn.execute("CREATE INDEX blob_refs_hash ON blob_refs (hash)")


def put_blobs(conn: sqlite3.Connection, session_id: str, blobs: Mapping[str, Blob]) -> None:
    """Store ``blobs`` (those already stored are left alone) and the session's references."""
    if not blobs:
        return
    conn.executemany(
        "INSERT OR IGNORE INTO blobs (hash, media_type, size, data) VALUES (?, ?, ?, ?)",
        [(b.hash, b.media_type, b.size, b.data) for b in blobs.values()],
    )
    conn.executemany(
        "INSERT OR IGNORE INTO blob_refs (session_id, hash) VALUES (?, ?)",
        [(session_id, digest) for digest in blobs],
    )


def fetch(conn: sqlite3.Connection, hashes: Iterable[str]) -> dict[str, Blob]:
    """The stored blobs among ``hashes``, by hash (a missing one is simply absent)."""
    wanted = sorted(hashes)
    found: dict[str, Blob] = {}
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            f"SELECT hash, media_type, size, data FROM blobs WHERE hash IN ({marks})", chunk
        )
        found.update((row[0], Blob(*row)) for row in rows)
    return found


def copy_refs(conn: sqlite3.Connection, from_session: str, to_session: str) -> None:
    """Give ``to_session`` every reference of ``from_session`` (a fork taking over its prefix)."""
    conn.execute(
        "INSERT OR IGNORE INTO blob_refs (session_id, hash)"
        " SELECT ?, hash FROM blob_refs WHERE session_id = ?",
        (to_session, from_session),
    )


def drop_refs(conn: sqlite3.Connection, session_id: str) -> None:
    """Delete the session's references, then every blob of them no session refers to."""
    hashes = [
        row[0]
        for row in conn.execute("SELECT hash FROM blob_refs WHERE session_id = ?", (session_id,))
    ]
    if not hashes:
        return
    conn.execute("DELETE FROM blob_refs WHERE session_id = ?", (session_id,))
    for start in range(0, len(hashes), _CHUNK):
        chunk = hashes[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        conn.execute(
            f"DELETE FROM blobs WHERE hash IN ({marks}) AND NOT EXISTS"
            " (SELECT 1 FROM blob_refs AS r WHERE r.hash = blobs.hash)",
            chunk,
        )
