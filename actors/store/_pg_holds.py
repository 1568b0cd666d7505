"""Which sessions a `PostgresStore` holds, and how it claims them on its owner connection.

A claim is two things done in one transaction on the owner connection: a row of the schema's
``owners`` table naming this store (host, pid, instance, the connection's backend), and the
session's advisory lock, taken for the connection's lifetime. The row names the holder; the
lock proves it alive, and the server drops it when the connection ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from actors.exceptions import StoreError
from actors.store._owner import Holder, busy
from actors.store._pg_sql import Statements, lock_key

if TYPE_CHECKING:
    from actors.store._pg_link import Connection

__all__ = ["Holds"]


class Holds:
    """The sessions one store holds. Used under the owner connection's lock.

    Args:
        sql: The statements of the store's schema.
        holder: The store's process and instance.
        where: The store, as errors name it.
    """

    def __init__(self, sql: Statements, holder: Holder, where: str) -> None:
        self.sql = sql
        self.holder = holder
        self.where = where
        self.held: set[str] = set()

    def params(self, session_id: str, **more: Any) -> dict[str, Any]:
        """The parameters every statement about a session's holder takes."""
        return {
            "session": session_id,
            "token": self.holder.token,
            "key": lock_key(self.sql.schema, session_id),
            **more,
        }

    def check_writer(self, conn: Connection, session_id: str) -> None:
        """Raise `SessionBusyError` when another live store holds the session."""
        row = conn.execute(self.sql.busy_holder, self.params(session_id)).fetchone()
        if row is not None:
            raise busy(session_id, row[0], row[1], self.where)

    def claim(self, conn: Connection, session_id: str) -> None:
        """Record this store as the holder and take the session's lock, or raise busy."""
        params = self.params(session_id, host=self.holder.host, pid=self.holder.pid)
        if conn.execute(self.sql.claim, params).fetchone() is None:
            row = conn.execute(self.sql.holder, params).fetchone()
            raise busy(session_id, row and row[0], row and row[1], self.where)
        conn.execute(self.sql.lock_session, params)  # the writes in flight finish first
        (locked,) = conn.execute(self.sql.try_lock, params).fetchone() or (False,)
        if not locked:  # a holder that has not recorded itself yet: not ours to take
            raise busy(session_id, None, None, self.where)

    def acquire(self, conn: Connection, session_id: str) -> None:
        """Claim the session unless this store holds it already."""
        if session_id not in self.held:
            self.claim(conn, session_id)
            self.held.add(session_id)

    def release(self, conn: Connection, session_id: str) -> None:
        """Drop the claim and give the lock back, if this store holds the session."""
        if session_id in self.held:
            params = self.params(session_id)
            conn.execute(self.sql.disown, params)
            conn.execute(self.sql.unlock, params)
            self.held.discard(session_id)

    def rearm(self, conn: Connection) -> None:
        """On a new owner connection, take back every held session that is still this store's."""
        for session_id in sorted(self.held):
            try:
                with conn.transaction():
                    self.claim(conn, session_id)
            except StoreError:
                # Another store took it while this one had no owner connection: this store's
                # writes to it are refused from now on, as they must be.
                self.held.discard(session_id)

    def release_all(self, conn: Connection) -> None:
        """Drop every claim of this store and give its locks back, before the connection closes.

        The server would drop the locks too once the connection is gone, but a moment after the
        close returns: giving them back here frees the sessions by the time `close` returns.
        """
        conn.execute(self.sql.disown_all, {"token": self.holder.token})
        conn.execute("SELECT pg_catalog.pg_advisory_unlock_all()")
        self.held.clear()
