"""The SQLite file of a session store: how it is opened, checked and migrated; what errors mean.

A store file is an SQLite database whose ``application_id`` is `APPLICATION_ID` and whose
``user_version`` is its schema version. `MIGRATIONS[n]` turns a version-``n`` file into a
version ``n + 1`` one; version 0 is an empty database, so the first migration creates the
tables. Each migration runs in its own transaction with the version bump, so a crash in the
middle leaves the file at the last version that completed.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final, NoReturn

from actors.exceptions import CorruptStoreError, SchemaVersionError, StoreError
from actors.store._sqlite_blobs import create_blobs
from actors.store._sqlite_budgets import create_budgets
from actors.store._sqlite_fences import create_fences
from actors.store._sqlite_forks import create_forks
from actors.store._sqlite_owners import create_owners

__all__ = [
    "APPLICATION_ID",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "check_file",
    "check_identity",
    "migrate",
    "open_file",
    "sqlite_errors",
]

APPLICATION_ID: Final = 0x41435452
"""``PRAGMA application_id`` of every store file: ``ACTR`` in ASCII."""

_MAGIC: Final = b"SQLite format 3\x00"
_HEADER_SIZE: Final = 100
_SYNCHRONOUS: Final = {"sync": "FULL", "batch": "NORMAL"}
# Primary SQLite result codes that mean the file itself is damaged.
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26
_BUSY_TIMEOUT = 10.0
_SQLITE_BUSY = 5
_HINTS = {
    5: "another connection held the file's write lock too long (10 s); retry later",
    8: "the file or its directory is read-only; check permissions",
    10: "the operating system reported an I/O error; check the disk",
    13: "the disk is full; free space and retry",
}


def _create_v1(conn: sqlite3.Connection) -> None:
    # Separate statements: Connection.executescript would commit the open transaction.
    conn.execute(
        """
        CREATE TABLE sessions (
            session_id    TEXT PRIMARY KEY NOT NULL,
            root_agent_id TEXT NOT NULL,
            data          TEXT NOT NULL,
            created_at    TEXT NOT NULL,
            updated_at    TEXT NOT NULL,
            event_count   INTEGER NOT NULL DEFAULT 0
        )
        """
    )
    conn.execute(
        """
        CREATE TABLE agents (
            session_id TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
            agent_id   TEXT NOT NULL,
            parent_id  TEXT,
            name       TEXT NOT NULL,
            status     TEXT NOT NULL,
            position   INTEGER NOT NULL,
            PRIMARY KEY (session_id, agent_id)
        )
        """
    )
    # WITHOUT ROWID: events are stored in primary-key order, so loading an agent's log reads
    # one contiguous range of the b-tree.
    conn.execute(
        """
        CREATE TABLE events (
            session_id TEXT NOT NULL,
            agent_id   TEXT NOT NULL,
            seq        INTEGER NOT NULL,
            type       TEXT NOT NULL,
            data       TEXT NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (session_id, agent_id, seq),
            FOREIGN KEY (session_id, agent_id)
                REFERENCES agents (session_id, agent_id) ON DELETE CASCADE
        ) WITHOUT ROWID
        """
    )
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")


def _create_snapshots(conn: sqlite3.Connection) -> None:
    # Version 3: one snapshot of the folded context per agent (see `SessionStore.put_snapshot`).
    conn.execute(
        """
        CREATE TABLE snapshots (
            session_id TEXT NOT NULL,
            agent_id   TEXT NOT NULL,
            seq        INTEGER NOT NULL,
            data       TEXT NOT NULL,
            PRIMARY KEY (session_id, agent_id),
            FOREIGN KEY (session_id, agent_id)
                REFERENCES agents (session_id, agent_id) ON DELETE CASCADE
        )
        """
    )


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [
    _create_v1,
    create_owners,
    _create_snapshots,
    create_forks,
    create_budgets,
    create_blobs,
    create_fences,
]
"""``MIGRATIONS[n]`` migrates a version-``n`` file to version ``n + 1``, inside a transaction."""

SCHEMA_VERSION: Final = len(MIGRATIONS)
"""The schema version this library writes."""


def check_file(path: Path) -> None:
    """Check, by reading the header, that ``path`` (if it holds anything) is an SQLite file.

    Catches garbage and files truncated mid-page before SQLite opens them. A truncation hidden
    behind a write-ahead log is left to SQLite's own check.

    Raises:
        CorruptStoreError: The file is not an SQLite database, or it was truncated.
    """
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    if size == 0:
        return
    with path.open("rb") as file:
        header = file.read(_HEADER_SIZE)
    if len(header) < _HEADER_SIZE or not header.startswith(_MAGIC):
        raise CorruptStoreError(
            f"{path} is not an SQLite database (its header is wrong): it is corrupted or not a "
            "session store. Restore it from a backup, or pass the path of a new file"
        )
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        raise CorruptStoreError(
            f"{path} has an impossible page size ({page_size}) in its header: the file is "
            "corrupted. Restore it from a backup, or pass the path of a new file"
        )
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        return  # the log may hold pages the main file does not have yet
    declared = int.from_bytes(header[28:32], "big")
    # The page count in the header is trusted only when its change counter is current.
    counted = header[24:28] == header[92:96] and declared > 0
    if size % page_size or (counted and size < declared * page_size):
        expected = f"{declared * page_size} bytes" if counted else "whole pages"
        raise CorruptStoreError(
            f"{path} is truncated: it holds {size} bytes, its header says {expected} of "
            f"{page_size}-byte pages. Restore it from a backup, or pass the path of a new file"
        )


def check_identity(conn: sqlite3.Connection, path: Path) -> int:
    """Read the file's identity and integrity without writing; return its schema version.

    Raises:
        CorruptStoreError: The database is damaged, or it is not a session store.
        SchemaVersionError: A newer version of the library wrote the file.
    """
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    problems = [row[0] for row in conn.execute("PRAGMA quick_check")]
    if problems != ["ok"]:
        raise CorruptStoreError(
            f"{path} is damaged ({'; '.join(problems[:3])}). Restore it from a backup, or "
            "pass the path of a new file"
        )
    if app_id != APPLICATION_ID and (app_id != 0 or version != 0 or tables):
        raise CorruptStoreError(
            f"{path} is an SQLite database but not a session store of this library "
            f"(application_id {app_id}, tables {sorted(tables)}); pass the path of a store "
            "file or of a new file"
        )
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{path} has store schema version {version}, newer than the {SCHEMA_VERSION} this "
            "version of actors reads; upgrade actors to open it"
        )
    return int(version)


def migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Bring the file to `SCHEMA_VERSION`, one migration per transaction.

    The version is read again under the write lock, so processes that open the same file at
    once migrate it only once.

    Raises:
        SchemaVersionError: Another process upgraded the file past this library meanwhile.
    """
    while True:
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"{path} has store schema version {version}, newer than the "
                    f"{SCHEMA_VERSION} this version of actors reads; upgrade actors to open it"
                )
            if version == SCHEMA_VERSION:
                conn.execute("COMMIT")
                return
            MIGRATIONS[version](conn)
            conn.execute(f"PRAGMA user_version = {version + 1}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.rollback()
            raise


def _when_not_busy(statement: Callable[[], str]) -> str:
    """Run ``statement`` again while the file is busy, for up to the busy timeout.

    Two processes opening a new file at once both switch it to WAL; SQLite may answer one of
    them ``SQLITE_BUSY`` at once, without waiting (waiting could deadlock), so the usual busy
    timeout does not apply: this is that wait.
    """
    deadline = time.monotonic() + _BUSY_TIMEOUT
    pause = 0.005
    while True:
        try:
            return statement()
        except sqlite3.OperationalError as exc:
            busy = getattr(exc, "sqlite_errorcode", 0) & 0xFF == _SQLITE_BUSY
            if not busy or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


@contextmanager
def sqlite_errors(path: Path, what: str) -> Iterator[None]:
    """Turn an `sqlite3.Error` raised inside into a `StoreError` naming ``path`` and ``what``.

    Raises:
        CorruptStoreError: SQLite found the file damaged.
        StoreError: Any other SQLite error, with a hint where its code has one.
    """
    try:
        yield
    except sqlite3.Error as exc:
        _raise(path, what, exc)


def _raise(path: Path, what: str, exc: sqlite3.Error) -> NoReturn:
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    if code in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        raise CorruptStoreError(
            f"{path} is damaged ({exc}) while {what}. Restore it from a backup, or pass the "
            "path of a new file"
        ) from exc
    hint = _HINTS.get(code, "see the cause for details")
    raise StoreError(f"{what} failed on {path}: {exc}; {hint}") from exc


def open_file(path: Path, durability: str) -> sqlite3.Connection:
    """Open, check and migrate the store file at ``path``, in WAL mode.

    Raises:
        CorruptStoreError: The file is damaged, truncated, or not a store of this library.
        SchemaVersionError: A newer version of the library wrote the file.
        StoreError: The file cannot be opened or put in WAL mode.
    """
    if path.is_dir():
        raise StoreError(f"{path} is a directory; pass the path of a database file")
    try:
        check_file(path)
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc}; check its permissions") from exc
    try:
        conn = sqlite3.connect(
            path, timeout=_BUSY_TIMEOUT, isolation_level=None, check_same_thread=False
        )
    except sqlite3.Error as exc:
        raise StoreError(
            f"cannot open {path}: {exc}; check that its directory exists and is writable"
        ) from exc
    try:
        with sqlite_errors(path, "opening"):
            check_identity(conn, path)  # reads only: a refused file is left untouched
            mode = _when_not_busy(lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
            if mode != "wal":
                raise StoreError(
                    f"{path} cannot use write-ahead logging (journal mode stays {mode!r}); "
                    "put the store on a local file system"
                )
            conn.execute(f"PRAGMA synchronous = {_SYNCHRONOUS[durability]}")
            conn.execute("PRAGMA foreign_keys = ON")
            migrate(conn, path)
    except BaseException:
        conn.close()
        raise
    return conn
