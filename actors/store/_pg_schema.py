"""The schema of a Postgres store: how it is recognised, checked and migrated.

The schema's ``schema_version`` table holds its version. ``migrations(schema)[n]`` turns
version ``n`` into ``n + 1``; each runs in its own transaction with the version bump, under an
advisory lock, so processes that open the same schema at once migrate it once, and a failed
migration leaves the version that last completed. A version newer than this library's is
refused before anything is written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from actors.exceptions import CorruptStoreError, SchemaVersionError
from actors.store import _pg_sql
from actors.store._pg_sql import Statements, lock_key

if TYPE_CHECKING:
    import psycopg

__all__ = ["prepare"]


def _version(conn: psycopg.Connection[Any], sql: Statements, where: str) -> int:
    """The schema's version: 0 when it holds no store yet.

    Raises:
        CorruptStoreError: The schema holds tables but no version table: not a store's schema.
    """
    tables = {row[0] for row in conn.execute(sql.tables, {"schema": sql.schema})}
    if "schema_version" not in tables:
        if tables:
            raise CorruptStoreError(
                f"schema {sql.schema!r} of {where} holds tables that are not a session store "
                f"of this library ({', '.join(sorted(map(str, tables))[:5])}); pass another "
                "schema to PostgresStore(schema=...)"
            )
        return 0
    rows = conn.execute(sql.version).fetchall()
    if len(rows) != 1:
        raise CorruptStoreError(
            f"the schema_version table of schema {sql.schema!r} of {where} holds {len(rows)} "
            "rows instead of one; restore the schema from a backup"
        )
    version = rows[0][0]
    assert isinstance(version, int)
    return version


def _check(version: int, latest: int, sql: Statements, where: str) -> None:
    if version > latest:
        raise SchemaVersionError(
            f"schema {sql.schema!r} of {where} has store schema version {version}, newer than "
            f"the {latest} this version of actors reads; upgrade actors to open it"
        )


def prepare(conn: psycopg.Connection[Any], sql: Statements, where: str) -> None:
    """Check the store's schema and bring it to the current version.

    ``conn`` is in autocommit mode; ``where`` names the database in errors.

    Raises:
        SchemaVersionError: A newer version of the library wrote the schema; nothing written.
        CorruptStoreError: The schema is not a store's.
    """
    steps = _pg_sql.migrations(sql.schema)
    version = _version(conn, sql, where)  # reads only: a refused schema is left untouched
    _check(version, len(steps), sql, where)
    while version < len(steps):
        with conn.transaction():
            conn.execute(
                "SELECT pg_catalog.pg_advisory_xact_lock(%(key)s::bigint)",
                {"key": lock_key(sql.schema, "\x00migration")},
            )
            version = _version(conn, sql, where)  # again, under the lock
            _check(version, len(steps), sql, where)
            if version == len(steps):
                return
            for statement in steps[version]:
                conn.execute(statement)
            conn.execute(sql.set_version, {"version": version + 1})
            version += 1
