"""The connections of a Postgres store: a pool for its calls, one owner connection for its holds.

Every call of the store borrows a pooled connection and runs in one transaction. The owner
connection is opened on the first `acquire`; it holds one session-level advisory lock per held
session, so the server itself frees those sessions when the connection ends (its process died,
or the network dropped it). Errors of the driver become `StoreError`s whose text is scrubbed of
the password, and never carry the driver's exception along (it holds the connection string).
"""

from __future__ import annotations

import math
import threading
import time
import weakref
from collections.abc import Callable
from contextlib import nullcontext
from functools import partial
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from actors._dependency_logs import quiet_dependency_logs
from actors.exceptions import StoreConnectionError, StoreError
from actors.store._pg_schema import prepare
from actors.store._pg_sql import Statements
from actors.store._pg_target import Target, connect_error, query_error

__all__ = ["Connection", "Link"]

T = TypeVar("T")
Connection = psycopg.Connection[Any]

# Every connection: timestamps in UTC, and commits that wait for the write-ahead log to reach
# the disk (a server configured with synchronous_commit=off would lose acknowledged events if
# it crashed).
_SETUP = (
    "SET TIME ZONE 'UTC';"
    " SELECT pg_catalog.set_config('synchronous_commit', 'on', false)"
    " WHERE current_setting('synchronous_commit') IN ('off', 'local')"
)
# The owner connection idles for as long as sessions are held: the server must neither time it
# out nor keep it for long after its client's host vanished (keepalives, ~60 s).
_OWNER_SETUP = (
    "SET tcp_keepalives_idle = 30; SET tcp_keepalives_interval = 10;"
    " SET tcp_keepalives_count = 3;"
    " SELECT pg_catalog.set_config('idle_session_timeout', '0', false)"
    " WHERE current_setting('server_version_num')::int >= 140000"
)


# When each pooled connection last finished a call. A connection used a moment ago is handed
# out unchecked (a check costs a round trip per call); one idle longer is checked first, so a
# connection the server dropped meanwhile (a restart, an idle timeout) is replaced unseen.
_used: weakref.WeakKeyDictionary[Connection, float] = weakref.WeakKeyDictionary()
_FRESH_FOR = 1.0


def _configure(conn: Connection) -> None:
    conn.execute(_SETUP)


def _check(conn: Connection) -> None:
    if time.monotonic() - _used.get(conn, 0.0) > _FRESH_FOR:
        ConnectionPool.check_connection(conn)


class Link:
    """The store's way to its server: checks the schema, then serves transactions.

    Args:
        target: Where to connect.
        sql: The statements of the store's schema.
        pool_size: The most connections the pool opens at once.
        connect_timeout: Seconds to wait for a connection (to open one, or to borrow one).

    Raises:
        StoreAuthenticationError, DatabaseNotFoundError, StoreConnectionError: Connecting failed.
        SchemaVersionError, CorruptStoreError: The schema cannot be used.
    """

    def __init__(
        self, target: Target, sql: Statements, *, pool_size: int, connect_timeout: float
    ) -> None:
        self.target = target
        self._timeout = connect_timeout
        # The pool warns when the server goes away ("discarding closed connection"): quiet
        # unless the application asked for logs, like the store's own.
        quiet_dependency_logs("psycopg")
        first = self.connect()
        try:
            self._guard("opening the store", lambda: prepare(first, sql, target.url))
        finally:
            first.close()
        pool: ConnectionPool[Connection] = ConnectionPool(
            target.dsn,
            min_size=1,
            max_size=pool_size,
            kwargs=self._kwargs("actors"),
            configure=_configure,
            check=_check,
            timeout=connect_timeout,
            name="actors-store",
            open=False,
        )
        try:
            self._guard("opening the connection pool", lambda: pool.open(True, connect_timeout))
        except BaseException:
            pool.close()  # its workers would go on trying to connect
            raise
        self._pool = pool
        self._owner: Connection | None = None
        self._owner_lock = threading.Lock()

    def _kwargs(self, name: str) -> dict[str, Any]:
        return {
            "autocommit": True,
            "connect_timeout": max(2, math.ceil(self._timeout)),  # libpq's minimum is 2 s
            "fallback_application_name": name,
        }

    def connect(self, *, owner: bool = False) -> Connection:
        """A new connection, set up like the pool's.

        Raises:
            StoreAuthenticationError, DatabaseNotFoundError, StoreConnectionError: It failed.
        """
        try:
            conn = psycopg.Connection.connect(
                self.target.dsn, **self._kwargs("actors-owner" if owner else "actors")
            )
        except psycopg.Error as exc:
            failure = connect_error(self.target, exc)
        else:
            self._guard("setting up a connection", lambda: _configure(conn))
            if owner:
                self._guard("setting up the owner connection", lambda: conn.execute(_OWNER_SETUP))
            return conn
        raise failure  # outside the except block: the driver's error holds the password

    def _guard(self, what: str, work: Callable[[], T]) -> T:
        try:
            return work()
        except PoolTimeout as exc:
            failure: StoreError = StoreConnectionError(
                f"no connection to the PostgreSQL server at {self.target.server} within "
                f"{self._timeout:g} s while {what} ({self.target.scrub(str(exc))}); check that "
                "the server runs, or give the store a larger pool_size"
            )
        except psycopg.Error as exc:
            failure = query_error(self.target, exc, what)
        raise failure

    def run(
        self,
        what: str,
        work: Callable[[Connection], T],
        *,
        snapshot: bool = False,
        single: bool = False,
    ) -> T:
        """Run ``work`` in one transaction on a pooled connection; commit unless it raises.

        ``snapshot`` makes it a read-only transaction over one consistent snapshot.
        ``single`` says ``work`` runs one statement, which is its own transaction: no BEGIN
        and COMMIT round trips around it.
        """

        def transaction() -> T:
            with self._pool.connection() as conn:
                with nullcontext() if single else conn.transaction():
                    if snapshot:
                        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    result = work(conn)
                _used[conn] = time.monotonic()
                return result

        return self._guard(what, transaction)

    def owned(
        self,
        what: str,
        work: Callable[[Connection], T],
        rearm: Callable[[Connection], None],
    ) -> T:
        """Run ``work`` in one transaction on the owner connection, opening it when needed.

        When the owner connection was lost (its advisory locks went with it), a new one is
        opened and ``rearm`` runs on it first, to take back what can still be taken.
        """
        with self._owner_lock:
            for attempt in (1, 2):
                conn = self._owner
                if conn is None or conn.closed or conn.broken:
                    fresh = conn = self._owner = self.connect(owner=True)
                    self._guard(f"{what} (taking back held sessions)", partial(rearm, fresh))
                try:
                    with conn.transaction():
                        return work(conn)
                except psycopg.Error as exc:
                    if conn.broken and attempt == 1:
                        continue  # the connection dropped before this call: open another
                    failure = query_error(self.target, exc, what)
                raise failure
        raise AssertionError("unreachable")

    def close(self, farewell: Callable[[Connection], None]) -> None:
        """Run ``farewell`` on the owner connection (if open), then close every connection."""
        with self._owner_lock:
            owner, self._owner = self._owner, None
        try:
            if owner is not None and not owner.broken:
                try:
                    with owner.transaction():
                        farewell(owner)
                except psycopg.Error:
                    # The claims die with the connection anyway: its advisory locks are gone
                    # once it closes, and a claim without its lock counts for nothing.
                    pass
        finally:
            if owner is not None:
                owner.close()
            self._pool.close()
