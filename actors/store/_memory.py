"""`MemoryStore`: the `SessionStore` semantics in a process's memory, for tests and simulations."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from actors.context._events import Clock, Event, system_clock
from actors.exceptions import SessionNotFoundError, StoreError
from actors.store._batch import (
    EncodedEvent,
    check_begin,
    check_id,
    check_own_record,
    check_range,
    check_record,
    check_storable,
    context_blob,
    decode_log,
    encode_data,
    encode_events,
    new_events,
)
from actors.store._budgets import (
    BudgetTotals,
    Caps,
    Counts,
    MemoryBudgets,
    check_reservation,
    check_settlement,
)
from actors.store._fences import check_fence_ids, fenced
from actors.store._fork import ForkedAgent, check_fork_args, fork_data, plan_fork
from actors.store._owner import Holder, busy, close_holder, holder_alive, new_holder
from actors.store._protocol import SessionStore
from actors.store._records import AgentRecord, SessionInfo, StoredAgent, StoredSession
from actors.store._snapshots import decode_snapshot, encode_snapshot

__all__ = ["MemoryStore"]


@dataclass
class _Session:
    root_agent_id: str
    data: str
    created_at: datetime
    updated_at: datetime
    # Insertion-ordered: ties of `position` load in the order agents were first put.
    agents: dict[str, AgentRecord] = field(default_factory=dict)
    logs: dict[str, list[EncodedEvent]] = field(default_factory=dict)
    event_count: int = 0
    snapshots: dict[str, tuple[int, str]] = field(default_factory=dict)  # agent -> (seq, JSON)
    fences: dict[str, tuple[int, str]] = field(default_factory=dict)  # agent -> (epoch, token)


@dataclass
class _Shared:
    """What every sibling store sees: the sessions, who holds which, which stores are open."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    sessions: dict[str, _Session] = field(default_factory=dict)
    holders: dict[str, Holder] = field(default_factory=dict)
    open: set[str] = field(default_factory=set)
    budgets: MemoryBudgets = field(default_factory=MemoryBudgets)


class MemoryStore(SessionStore):
    """A `SessionStore` that keeps everything in memory, with the same rules as `SQLiteStore`.

    Events are kept encoded (JSON text), exactly as a durable store keeps them: a payload that
    is not plain JSON is refused the same way, and nothing a caller changes after a call leaks
    into the store. Nothing survives the process. Safe to use from many threads.

    `sibling` gives a second store instance on the same sessions, as a second process opening
    the same database would have: it acquires sessions for itself. The sessions are dropped
    when the last of the siblings closes.

    Example:
        >>> from actors.store import AgentRecord, MemoryStore
        >>> with MemoryStore() as store:
        ...     store.create_session("s1", root_agent_id="root")
        ...     store.put_agent("s1", AgentRecord("root", None, "assistant", "idle"))
        ...     store.last_seq("s1", "root")
        -1

    Args:
        clock: Where the sessions' ``created_at`` and ``updated_at`` come from.
    """

    def __init__(self, *, clock: Clock = system_clock) -> None:
        self._clock = clock
        self._shared = _Shared()
        self._lock = self._shared.lock
        self._sessions = self._shared.sessions
        self._closed = False
        self._holder = new_holder(self)
        self._shared.open.add(self._holder.token)

    def sibling(self) -> MemoryStore:
        """A new store instance on the same sessions, with its own holds and its own `close`.

        Raises:
            StoreError: This store is closed.
        """
        with self._lock:
            self._check_open()
            twin = MemoryStore(clock=self._clock)
            twin._shared = self._shared
            twin._lock = self._shared.lock
            twin._sessions = self._shared.sessions
            self._shared.open.add(twin._holder.token)
        return twin

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._sessions)} sessions"
        return f"<MemoryStore {state}>"

    def _now(self) -> datetime:
        return self._clock().astimezone(UTC)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("this MemoryStore is closed; create a new one")

    def _check_writer(self, session_id: str) -> None:
        """Raise `SessionBusyError` when another open sibling holds the session."""
        holder = self._shared.holders.get(session_id)
        if holder is None or holder.token == self._holder.token:
            return
        if holder_alive(holder):  # a sibling closed or garbage-collected holds nothing
            raise busy(session_id, holder.host, holder.pid, "this MemoryStore")

    def _check_fence(self, session_id: str, session: _Session, agent_id: str) -> None:
        """Raise `FencedWriteError` when another instance fenced the agent."""
        fence = session.fences.get(agent_id)
        if fence is not None and fence[1] != self._holder.token:
            raise fenced(session_id, agent_id, fence[0], "this MemoryStore")

    def _session(self, session_id: str) -> _Session:
        self._check_open()
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionNotFoundError(
                f"no session {session_id!r} in this MemoryStore; "
                "store.list_sessions() lists the sessions it holds"
            )
        return session

    def create_session(
        self, session_id: str, *, root_agent_id: str, data: Mapping[str, Any] | None = None
    ) -> None:
        """Create a session, or do nothing when it exists with the same root.

        See `SessionStore.create_session`.
        """
        check_id("session_id", session_id)
        check_id("root_agent_id", root_agent_id)
        encoded = encode_data("session data", data)
        with self._lock:
            self._check_open()
            self._check_writer(session_id)
            existing = self._sessions.get(session_id)
            if existing is not None:
                if existing.root_agent_id != root_agent_id:
                    raise StoreError(
                        f"session {session_id!r} exists with root agent "
                        f"{existing.root_agent_id!r}, not {root_agent_id!r}; choose another "
                        "session id or delete the old session"
                    )
                return
            now = self._now()
            self._sessions[session_id] = _Session(root_agent_id, encoded, now, now)

    def begin_session(
        self,
        session_id: str,
        root: AgentRecord,
        *,
        data: Mapping[str, Any] | None = None,
        acquire: bool = False,
    ) -> bool:
        """Claim, create and put the root of a session at once.

        See `actors.store._protocol.begin_session`.
        """
        encoded = check_begin(session_id, root, data)
        with self._lock:
            self._check_open()
            self._check_writer(session_id)
            session = self._sessions.get(session_id)
            if session is not None and session.root_agent_id != root.agent_id:
                raise StoreError(
                    f"session {session_id!r} exists with root agent "
                    f"{session.root_agent_id!r}, not {root.agent_id!r}; choose another "
                    "session id or delete the old session"
                )
            if acquire:
                self._shared.holders[session_id] = self._holder
            now = self._now()
            if session is None:
                session = self._sessions[session_id] = _Session(root.agent_id, encoded, now, now)
            elif session.logs.get(root.agent_id):
                return False  # the root has a log: put nothing (the caller restores it)
            session.agents[root.agent_id] = root
            session.logs.setdefault(root.agent_id, [])
            session.updated_at = now
            return True

    def put_agent(self, session_id: str, record: AgentRecord) -> None:
        """Insert or update an agent of the session. See `SessionStore.put_agent`."""
        check_storable(session_id)
        check_record(record)
        with self._lock:
            session = self._session(session_id)
            self._check_writer(session_id)
            self._check_fence(session_id, session, record.agent_id)
            session.agents[record.agent_id] = record
            session.logs.setdefault(record.agent_id, [])
            session.updated_at = self._now()

    def append_events(
        self,
        session_id: str,
        agent_id: str,
        events: Sequence[Event],
        *,
        record: AgentRecord | None = None,
    ) -> None:
        """Append a batch of events to an agent's log. See `SessionStore.append_events`."""
        check_storable(session_id, agent_id)
        batch = encode_events(session_id, agent_id, events)
        if record is not None:
            check_own_record(record, agent_id)
        with self._lock:
            session = self._session(session_id)
            self._check_writer(session_id)
            self._check_fence(session_id, session, agent_id)
            log = session.logs.get(agent_id)
            if log is None and record is None:
                raise StoreError(
                    f"agent {agent_id!r} is not part of session {session_id!r}; "
                    "put_agent() it before appending its events"
                )
            known: list[EncodedEvent] = log if log is not None else []

            def stored(first: int, last: int) -> dict[int, tuple[str, str]]:
                return {e.seq: (e.type, e.data) for e in known[first : last + 1]}

            # Checked before anything changes: a refused batch leaves the record unput too.
            fresh = new_events(session_id, agent_id, batch, len(known) - 1, stored)
            if record is not None:
                session.agents[record.agent_id] = record
                session.updated_at = self._now()
            log = session.logs.setdefault(agent_id, known)
            if fresh:
                log.extend(fresh)
                session.event_count += len(fresh)
                session.updated_at = self._now()

    def load(self, session_id: str, *, snapshots: bool = False) -> StoredSession:
        """The whole session, agents in spawn order. See `SessionStore.load`."""
        check_storable(session_id)
        with self._lock:
            session = self._session(session_id)
            records = sorted(session.agents.values(), key=lambda record: record.position)
            kept = dict(session.snapshots) if snapshots else {}
            logs = {
                record.agent_id: tuple(
                    session.logs[record.agent_id][kept.get(record.agent_id, (0, ""))[0] :]
                )
                for record in records
            }
            head = (session.root_agent_id, session.data, session.created_at, session.updated_at)
        # Decoding happens outside the lock: the logs are append-only and copied above.
        agents = []
        for record in records:
            blob = context_blob(
                record,
                decode_log([(e.seq, e.type, e.data, e.created_at) for e in logs[record.agent_id]]),
            )
            snapshot = kept.get(record.agent_id)
            if snapshot is None:
                agents.append(StoredAgent(record, blob))
            else:
                agents.append(StoredAgent(record, blob, decode_snapshot(snapshot[1]), snapshot[0]))
        root, data, created_at, updated_at = head
        return StoredSession(
            session_id, root, json.loads(data), created_at, updated_at, tuple(agents)
        )

    def read_events(
        self, session_id: str, agent_id: str, *, start: int = 0, stop: int | None = None
    ) -> list[dict[str, Any]]:
        """The agent's events with ``start <= seq < stop``. See `SessionStore.read_events`."""
        start, stop = check_range(start, stop)
        with self._lock:
            log = self._session(session_id).logs.get(agent_id, [])
            rows = [
                (e.seq, e.type, e.data, e.created_at)
                for e in log[max(start, 0) : stop if stop is None else max(stop, 0)]
            ]
        return decode_log(rows)

    def put_snapshot(self, session_id: str, agent_id: str, snapshot: Mapping[str, Any]) -> None:
        """Keep the agent's snapshot. See `SessionStore.put_snapshot`."""
        encoded = encode_snapshot(session_id, agent_id, snapshot)
        with self._lock:
            session = self._session(session_id)
            self._check_writer(session_id)
            if agent_id not in session.agents:
                raise StoreError(
                    f"agent {agent_id!r} is not part of session {session_id!r}; "
                    "put_agent() it before writing its snapshot"
                )
            self._check_fence(session_id, session, agent_id)
            session.snapshots[agent_id] = encoded

    def fork(
        self, session_id: str, new_session_id: str, *, at: int | None, root_agent_id: str
    ) -> None:
        """Fork the session just after its root's event ``at``. See `SessionStore.fork`.

        The fork's logs are new lists of the original's (immutable) stored events: only the
        references are copied, and deleting the original leaves them to the fork.
        """
        check_fork_args(session_id, new_session_id, at)
        check_id("root_agent_id", root_agent_id)
        with self._lock:
            source = self._session(session_id)
            self._check_writer(new_session_id)
            if new_session_id in self._sessions:
                raise StoreError(
                    f"session {new_session_id!r} exists already; fork into a new session id"
                )
            records = sorted(source.agents.values(), key=lambda record: record.position)
            planned: list[ForkedAgent] = plan_fork(
                records,
                source.root_agent_id,
                root_agent_id,
                at,
                {agent: len(log) - 1 for agent, log in source.logs.items()},
                lambda probes: [source.logs[agent][seq].created_at for agent, seq in probes],
            )
            data = fork_data(
                json.loads(source.data),
                session_id,
                at,
                source.root_agent_id,
                root_agent_id,
                planned,
            )
            now = self._now()
            fork = _Session(root_agent_id, encode_data("session data", data), now, now)
            for agent in planned:
                fork.agents[agent.record.agent_id] = agent.record
                fork.logs[agent.record.agent_id] = source.logs[agent.source_id][: agent.upto]
                fork.event_count += agent.upto
            self._sessions[new_session_id] = fork

    def list_sessions(self) -> list[SessionInfo]:
        """Every session, the most recently created first. See `SessionStore.list_sessions`."""
        with self._lock:
            self._check_open()
            return [
                SessionInfo(
                    session_id=session_id,
                    root_agent_id=session.root_agent_id,
                    data=json.loads(session.data),
                    created_at=session.created_at,
                    updated_at=session.updated_at,
                    agent_count=len(session.agents),
                    event_count=session.event_count,
                )
                for session_id, session in reversed(self._sessions.items())
            ]

    def delete(self, session_id: str) -> None:
        """Delete a session with its agents and events. See `SessionStore.delete`."""
        check_storable(session_id)
        with self._lock:
            self._session(session_id)
            self._check_writer(session_id)
            del self._sessions[session_id]

    def last_seq(self, session_id: str, agent_id: str) -> int:
        """The agent's highest stored seq, -1 when none. See `SessionStore.last_seq`."""
        check_storable(session_id, agent_id)
        with self._lock:
            return len(self._session(session_id).logs.get(agent_id, ())) - 1

    def fence(self, session_id: str, agent_ids: Sequence[str] | None = None) -> int:
        """Make this instance the only writer of agents of a session; their new epoch.

        See `actors.store._fences.fence`.
        """
        check_storable(session_id)
        ids = check_fence_ids(agent_ids)
        with self._lock:
            session = self._session(session_id)
            self._check_writer(session_id)
            chosen = list(session.agents) if ids is None else ids
            missing = sorted(set(chosen) - set(session.agents))
            if missing:
                raise StoreError(
                    f"cannot fence agents {missing} of session {session_id!r}: they are not "
                    "part of it; put_agent() them first"
                )
            epoch = max((epoch for epoch, _ in session.fences.values()), default=0) + 1
            for agent_id in chosen:
                session.fences[agent_id] = (epoch, self._holder.token)
            return epoch

    def acquire(self, session_id: str) -> None:
        """Make this store the session's only writer. See `SessionStore.acquire`."""
        check_id("session_id", session_id)
        with self._lock:
            self._check_open()
            self._check_writer(session_id)
            self._shared.holders[session_id] = self._holder

    def release(self, session_id: str) -> None:
        """Stop holding the session. Idempotent. See `SessionStore.release`."""
        check_storable(session_id)
        with self._lock:
            holder = self._shared.holders.get(session_id)
            if holder is not None and holder.token == self._holder.token:
                del self._shared.holders[session_id]

    # -- shared budgets (`BudgetStore`) ------------------------------------------------------

    def reserve_budget(
        self, budget: str, hold: str, amount: Counts, caps: Caps
    ) -> BudgetTotals | None:
        """Hold ``amount`` on ``budget`` if it fits. See `BudgetStore.reserve_budget`."""
        check_reservation(budget, hold, amount, caps)
        self._check_open()
        return self._shared.budgets.reserve(budget, hold, amount, caps)

    def settle_budget(self, budget: str, hold: str, spent: Counts) -> bool:
        """End a hold, counting ``spent``. See `BudgetStore.settle_budget`."""
        check_settlement(budget, hold, spent)
        self._check_open()
        return self._shared.budgets.settle(budget, hold, spent)

    def read_budget(self, budget: str) -> BudgetTotals:
        """The budget's totals. See `BudgetStore.read_budget`."""
        check_id("budget", budget)
        self._check_open()
        return self._shared.budgets.read(budget)

    def close(self) -> None:
        """Release this store's sessions; the last sibling to close drops them all. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            shared = self._shared
            mine = [sid for sid, h in shared.holders.items() if h.token == self._holder.token]
            for session_id in mine:
                del shared.holders[session_id]
            shared.open.discard(self._holder.token)
            if not shared.open:
                self._sessions.clear()
                shared.budgets = MemoryBudgets()
        close_holder(self._holder)
