"""Blobs in a Postgres store: binary parts kept once, by hash, and swept on delete.

Version 4 of the schema (see `actors.store._pg_sql`) adds the ``blobs`` and ``blob_refs``
tables, as version 5 of an SQLite file does (see `actors.store._sqlite_blobs`): each part's
content once (hash, media type, size, base64 text), and a row per (session, blob) that a
session refers to, written in the transaction of the events that refer to it. Deleting a
session deletes its references and then the blobs no session refers to any more; a fork takes
over the references of the session it reads through when that session is deleted.

Concurrency: a writer that finds a blob already stored locks its row (a no-op update) until it
commits its reference; a delete locks the rows of the blobs it may sweep, in hash order as
writers do, before it looks for references with a new statement (a new snapshot, under READ
COMMITTED). So a sweep never deletes a blob a concurrent writer is about to refer to: either
the writer's reference is committed before the sweep looks, or the writer waits for the sweep
and stores the blob again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from actors.store._blobs import Blob

if TYPE_CHECKING:
    from actors.store._pg_link import Connection

__all__ = ["copy_refs", "drop_refs", "fetch", "put_blobs"]


def put_blobs(conn: Connection, s: str, session_id: str, blobs: Mapping[str, Blob]) -> None:
    """Store ``blobs`` (locking those already stored) and the session's references to them."""
    if not blobs:
        return
    ordered = sorted(blobs.values(), key=lambda blob: blob.hash)
    hashes = [blob.hash for blob in ordered]
    conn.execute(
        f"INSERT INTO {s}.blobs AS b (hash, media_type, size, data)"
        " SELECT * FROM unnest(%(hashes)s::text[], %(types)s::text[], %(sizes)s::bigint[],"
        " %(datas)s::text[]) ORDER BY 1"
        " ON CONFLICT (hash) DO UPDATE SET size = excluded.size",
        {
            "hashes": hashes,
            "types": [blob.media_type for blob in ordered],
            "sizes": [blob.size for blob in ordered],
            "datas": [blob.data for blob in ordered],
        },
    )
    conn.execute(
        f"INSERT INTO {s}.blob_refs (session_id, hash)"
        " SELECT %(session)s, unnest(%(hashes)s::text[]) ON CONFLICT DO NOTHING",
        {"session": session_id, "hashes": hashes},
    )


def fetch(conn: Connection, s: str, hashes: Iterable[str]) -> dict[str, Blob]:
    """The stored blobs among ``hashes``, by hash (a missing one is simply absent)."""
    rows = conn.execute(
        f"SELECT hash, media_type, size, data FROM {s}.blobs WHERE hash = ANY(%(hashes)s::text[])",
        {"hashes": sorted(hashes)},
    ).fetchall()
    return {row[0]: Blob(row[0], row[1], int(row[2]), row[3]) for row in rows}


def copy_refs(conn: Connection, s: str, from_session: str, to_session: str) -> None:
    """Give ``to_session`` every reference of ``from_session`` (a fork taking over its prefix)."""
    conn.execute(
        f"INSERT INTO {s}.blob_refs (session_id, hash)"
        f" SELECT %(to)s, hash FROM {s}.blob_refs WHERE session_id = %(from)s"
        " ON CONFLICT DO NOTHING",
        {"to": to_session, "from": from_session},
    )


def drop_refs(conn: Connection, s: str, session_id: str) -> None:
    """Delete the session's references, then every blob of them no session refers to."""
    rows = conn.execute(
        f"DELETE FROM {s}.blob_refs WHERE session_id = %(session)s RETURNING hash",
        {"session": session_id},
    ).fetchall()
    if not rows:
        return
    hashes = sorted(row[0] for row in rows)
    conn.execute(
        f"SELECT 1 FROM {s}.blobs WHERE hash = ANY(%(hashes)s::text[]) ORDER BY hash FOR UPDATE",
        {"hashes": hashes},
    ).fetchall()
    conn.execute(
        f"DELETE FROM {s}.blobs AS b WHERE b.hash = ANY(%(hashes)s::text[])"
        f" AND NOT EXISTS (SELECT 1 FROM {s}.blob_refs AS r WHERE r.hash = b.hash)",
        {"hashes": hashes},
    )
