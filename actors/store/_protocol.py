"""`SessionStore`: the contract between the runtime and wherever event logs persist."""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Protocol, Self, TypeGuard, runtime_checkable

from actors.context._events import Event
from actors.exceptions import SessionNotFoundError, UserError
from actors.store._records import AgentRecord, SessionInfo, StoredSession

__all__ = ["SessionStore", "begin_session", "check_store", "has_session", "is_store"]


@runtime_checkable
class SessionStore(Protocol):
    """Where the event logs of an agent tree persist, session by session.

    A session is one agent tree: its root, every agent spawned under it (`AgentRecord`), and
    each agent's append-only event log. The runtime writes the events of one step in one
    `append_events` call, and a call returns only once its events are committed, so nothing
    reported to the host is missing after a crash.

    Every method is safe to call from many threads at once. Every error is a `StoreError`
    (or a `UserError` for an argument that cannot be used) naming the session, agent or file.

    A store instance may `acquire` a session to become its only writer: while it holds the
    session, every write to it through another store instance (in this process or another)
    raises `SessionBusyError` and writes nothing. A session nobody holds can be written through
    any instance. A holder whose process ended holds nothing.

    `SQLiteStore`, `PostgresStore` and `MemoryStore` implement it;
    `actors.store.conformance.StoreConformance` is the test suite any implementation can run. A
    class that subclasses `SessionStore` explicitly inherits the context-manager methods, which
    call `close`.

    Example:
        >>> from actors.exceptions import SessionBusyError
        >>> from actors.store import MemoryStore
        >>> first = MemoryStore()
        >>> second = first.sibling()  # a second instance on the same sessions
        >>> first.acquire("s1")
        >>> try:
        ...     second.acquire("s1")
        ... except SessionBusyError as error:
        ...     print(error.session_id)
        s1
        >>> first.close()
        >>> second.acquire("s1")  # free again once its holder closed
        >>> second.close()
    """

    def create_session(
        self, session_id: str, *, root_agent_id: str, data: Mapping[str, Any] | None = None
    ) -> None:
        """Create a session, or do nothing when it exists with the same root.

        Args:
            session_id: The new session's id.
            root_agent_id: The id of the tree's root agent.
            data: A small JSON object kept with the session (such as the root spec's name).
                Ignored when the session exists already.

        Raises:
            StoreError: The session exists with a different root agent.
            SessionBusyError: Another live store instance holds the session.
            UserError: An empty id, or ``data`` that is not plain JSON.
        """
        ...

    def put_agent(self, session_id: str, record: AgentRecord) -> None:
        """Insert an agent of the session, or update its parent, name, status and position.

        Raises:
            SessionNotFoundError: The session does not exist.
            SessionBusyError: Another live store instance holds the session.
        """
        ...

    def append_events(
        self,
        session_id: str,
        agent_id: str,
        events: Sequence[Event],
        *,
        record: AgentRecord | None = None,
    ) -> None:
        """Append a batch of events to an agent's log, in one transaction.

        The batch is durable (as the store's durability mode defines) when the call returns.
        Seqs must continue the stored log without gaps. An event whose seq is already stored
        with the same ``type`` and ``data`` is skipped, so re-appending after a crash is
        harmless.

        With ``record`` (the same agent's), the agent is put first, as by `put_agent`: a new
        agent with its first events, or a status with the events that changed it, is written
        together, in the same transaction, and nothing of either when the call fails.

        Raises:
            SessionNotFoundError: The session does not exist.
            SessionBusyError: Another live store instance holds the session. Nothing of the
                batch is written.
            StoreError: The agent was never put (`put_agent` it first); a gap in the seqs; or an
                event that differs from the one stored at its seq. Nothing of the batch is
                written.
            UserError: An item that is not an `Event`, a payload that is not plain JSON, or a
                ``record`` of another agent.
        """
        ...

    def load(self, session_id: str, *, snapshots: bool = False) -> StoredSession:
        """The whole session: its agents in spawn order, each with a serialized context.

        With ``snapshots``, an agent that has a snapshot (`put_snapshot`) comes with it
        (`StoredAgent.snapshot`), and its context holds only its events from the snapshot's
        ``seq`` on (`StoredAgent.first_seq`): what an activation reads instead of the whole
        log. Everything is read in one consistent view of the store.

        Raises:
            SessionNotFoundError: The session does not exist.
        """
        ...

    def read_events(
        self, session_id: str, agent_id: str, *, start: int = 0, stop: int | None = None
    ) -> list[dict[str, Any]]:
        """The agent's stored events with ``start <= seq < stop``, in seq order.

        Each as ``event.model_dump(mode="json")`` gives it (as in a loaded context). An agent
        the session does not hold has no events.

        Raises:
            SessionNotFoundError: The session does not exist.
            UserError: ``start`` or ``stop`` is not an int.
        """
        ...

    def put_snapshot(self, session_id: str, agent_id: str, snapshot: Mapping[str, Any]) -> None:
        """Keep ``snapshot`` as the agent's snapshot, in place of the one before.

        A snapshot is a JSON object with an int ``seq``: the first event `load` reads with
        it. The store keeps one per agent and reads nothing else of it; deleting the session
        deletes it. The runtime writes snapshots of the folded context and checks them against
        the log when it reads them (a snapshot that does not fit is ignored).

        Raises:
            SessionNotFoundError: The session does not exist.
            SessionBusyError: Another live store instance holds the session.
            StoreError: The agent was never put (`put_agent` it first).
            UserError: A snapshot that is not plain JSON or has no int ``seq`` >= 0.
        """
        ...

    def fork(
        self, session_id: str, new_session_id: str, *, at: int | None, root_agent_id: str
    ) -> None:
        """Create ``new_session_id``: the session cut just after its root's event ``at``.

        The fork holds every agent of the tree at the cut, each with the prefix of its log up
        to the cut: the root's events up to ``at``, another agent's events stamped before the
        root's next event (all of them when ``at`` is the root's last); agents spawned later
        are left out. Agents are renamed under the new
        root id (``<root>-sub-1`` becomes ``<root_agent_id>-sub-1``); an agent cut short of
        its log is recorded as ``"running"`` (a restore decides what it was doing). The
        session's data is the original's with ``forked_from`` (``{"session", "at"}``) and
        the ``forks`` lineage the restore reads to give read-through events the new ids.

        The prefixes are shared by reference where the store can (no event is copied), so a
        fork costs about the same whatever the length of the logs; reading the fork reads
        through to them. The original is not changed, and deleting it keeps the fork whole.
        Snapshots are not carried over. With ``at=None`` every log is kept whole: a copy of
        the session (as `Runtime.rewind` keeps the branch it abandons).

        Raises:
            SessionNotFoundError: The session does not exist.
            StoreError: ``new_session_id`` exists already.
            UserError: An empty id, the same id twice, or an ``at`` that is neither None nor a
                seq of the root's log.
        """
        ...

    def list_sessions(self) -> list[SessionInfo]:
        """A summary of every session, the most recently created first."""
        ...

    def delete(self, session_id: str) -> None:
        """Delete a session with its agents and events.

        A fork of the session keeps the prefix it shares: the store first copies it into the
        fork (whoever holds the fork), so deleting costs the shared events of its forks.

        Raises:
            SessionNotFoundError: The session does not exist.
            SessionBusyError: Another live store instance holds the session.
        """
        ...

    def last_seq(self, session_id: str, agent_id: str) -> int:
        """The highest stored seq of the agent's log, or -1 when it holds no event.

        Raises:
            SessionNotFoundError: The session does not exist.
        """
        ...

    def acquire(self, session_id: str) -> None:
        """Make this store instance the session's only writer, until `release` or `close`.

        Idempotent: acquiring a session this instance holds does nothing. The session need not
        exist yet, so a host can claim a session id before it creates the session. A holder
        whose process ended (or whose store was closed) no longer counts, so its sessions can
        be acquired again.

        Raises:
            SessionBusyError: Another live store instance holds the session; the error names
                the holder's host and process id.
            StoreError: The store is closed, or cannot record the holder.
            UserError: An empty session id.
        """
        ...

    def release(self, session_id: str) -> None:
        """Stop holding the session; anyone may write it again. Idempotent.

        Releasing a session this instance does not hold does nothing (it never frees a session
        that another instance holds).
        """
        ...

    def close(self) -> None:
        """Release every session held and the store's resources.

        Idempotent; any other call afterwards fails, except `release`, which does nothing.
        """
        ...

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# Classes seen to satisfy the protocol: a runtime-checkable isinstance() looks up every method
# each time (~10 us), and a host checks the store of every session it opens.
_STORE_TYPES: weakref.WeakSet[type] = weakref.WeakSet()


def is_store(obj: object) -> TypeGuard[SessionStore]:
    """``isinstance(obj, SessionStore)``, remembered per class."""
    kind = type(obj)
    if kind in _STORE_TYPES:
        return True
    if isinstance(obj, SessionStore):
        _STORE_TYPES.add(kind)
        return True
    return False


def check_store(store: object) -> None:
    """A store is None or has the `SessionStore` methods; else `UserError`."""
    if store is not None and not is_store(store):
        raise UserError(
            "store must be a SessionStore (SQLiteStore(path), MemoryStore(), "
            f"PostgresStore(dsn)) or None, got {type(store).__name__}"
        )


def has_session(store: SessionStore, session_id: str) -> bool:
    """Whether ``store`` holds the session."""
    try:
        store.last_seq(session_id, "")
    except SessionNotFoundError:
        return False
    return True


def begin_session(
    store: SessionStore,
    session_id: str,
    root: AgentRecord,
    *,
    data: Mapping[str, Any] | None = None,
    acquire: bool = False,
) -> bool:
    """Start a session's tree: claim it, create it, put its root agent's record.

    What a host does for every new session, in one transaction where the store offers a
    ``begin_session`` method of this signature (the built-in stores do), else as the calls
    `SessionStore.acquire`, `SessionStore.create_session`, `SessionStore.last_seq` and
    `SessionStore.put_agent`, so a store without the method still works.

    Args:
        store: Where the session lives.
        session_id: The session.
        root: The record of the tree's root agent (its id is the session's root agent id).
        data: A small JSON object kept with a new session.
        acquire: Make ``store`` the session's only writer first (see `SessionStore.acquire`);
            the claim stays when the root is found with a log.

    Returns:
        True when the root's record was put; False when the root agent already has events
        (the session is left as it was, but for the claim: restore it instead).

    Raises:
        SessionBusyError: Another live store instance holds the session.
        StoreError: The session exists with a different root agent, or the store failed.
        UserError: An empty id, a record that is not an `AgentRecord`, or ``data`` that is
            not plain JSON.
    """
    own = getattr(store, "begin_session", None)
    if own is not None:
        return bool(own(session_id, root, data=data, acquire=acquire))
    if acquire:
        store.acquire(session_id)
    store.create_session(session_id, root_agent_id=root.agent_id, data=data)
    if store.last_seq(session_id, root.agent_id) >= 0:
        return False
    store.put_agent(session_id, root)
    return True
