"""Forks in a Postgres store: prefixes shared by reference, read through, kept on delete.

Version 3 of the schema adds the ``forks`` table, as version 4 of an SQLite file does (see
`actors.store._sqlite_forks`): one row per agent of a fork, pointing at the agent of the
session it was forked from and at the seq its shared prefix stops before. Reading follows the
chain; deleting a session first copies into each fork of it the rows that fork shares.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from actors.store._fork import ForkedAgent
from actors.store._pg_blobs import copy_refs

if TYPE_CHECKING:
    from actors.store._pg_link import Connection

__all__ = [
    "created_at_many",
    "detach_forks",
    "event_created_at",
    "insert_agents",
    "last_seqs",
    "has_forks",
    "insert_fork",
    "read_through",
    "segments",
]

NO_END = 2**63 - 1


def has_forks(conn: Connection, s: str, session_id: str) -> bool:
    """Whether any agent of the session reads a prefix through."""
    row = conn.execute(
        f"SELECT 1 FROM {s}.forks WHERE session_id = %(session)s LIMIT 1", {"session": session_id}
    ).fetchone()
    return row is not None


def _base(conn: Connection, s: str, session_id: str, agent_id: str) -> tuple[str, str, int] | None:
    row = conn.execute(
        f"SELECT base_session, base_agent, upto FROM {s}.forks"
        " WHERE session_id = %(session)s AND agent_id = %(agent)s",
        {"session": session_id, "agent": agent_id},
    ).fetchone()
    return None if row is None else (str(row[0]), str(row[1]), int(row[2]))


def segments(
    conn: Connection, s: str, session_id: str, agent_id: str, stop: int = NO_END
) -> list[tuple[str, str, int]]:
    """Where the agent's events with ``seq < stop`` are stored, in seq order (as in SQLite)."""
    chain: list[tuple[str, str, int]] = [(session_id, agent_id, stop)]
    base = _base(conn, s, session_id, agent_id)
    while base is not None:
        stop = min(stop, base[2])
        chain.append((base[0], base[1], stop))
        base = _base(conn, s, base[0], base[1])
    chain.reverse()
    return chain


def read_through(
    conn: Connection, s: str, session_id: str, agent_id: str, start: int, stop: int
) -> list[Any]:
    """The agent's ``(seq, type, data, created_at)`` rows with ``start <= seq < stop``."""
    rows: list[Any] = []
    for where, agent, below in segments(conn, s, session_id, agent_id, stop):
        rows += conn.execute(
            f"SELECT seq, type, data, created_at FROM {s}.events"
            " WHERE session_id = %(session)s AND agent_id = %(agent)s"
            " AND seq >= %(start)s AND seq < %(stop)s ORDER BY seq",
            {"session": where, "agent": agent, "start": start, "stop": below},
        ).fetchall()
    return rows


def event_created_at(conn: Connection, s: str, session_id: str, agent_id: str, seq: int) -> str:
    """The stored timestamp of the agent's event at ``seq``, read through a shared prefix."""
    rows = read_through(conn, s, session_id, agent_id, seq, seq + 1)
    if not rows:
        raise KeyError(f"no event {seq} of agent {agent_id!r} in session {session_id!r}")
    return str(rows[0][3])


def last_seqs(conn: Connection, s: str, session_id: str) -> dict[str, int]:
    """Every agent's highest seq, read through a shared prefix: one statement."""
    rows = conn.execute(
        "SELECT a.agent_id, GREATEST("
        f"(SELECT e.seq FROM {s}.events AS e WHERE e.session_id = a.session_id"
        " AND e.agent_id = a.agent_id ORDER BY e.seq DESC LIMIT 1),"
        f" (SELECT f.upto - 1 FROM {s}.forks AS f WHERE f.session_id = a.session_id"
        " AND f.agent_id = a.agent_id))"
        f" FROM {s}.agents AS a WHERE a.session_id = %(session)s",
        {"session": session_id},
    ).fetchall()
    return {str(agent): -1 if last is None else int(last) for agent, last in rows}


def created_at_many(
    conn: Connection, s: str, session_id: str, probes: Sequence[tuple[str, int]]
) -> list[str]:
    """The stored timestamps of ``(agent, seq)`` events, in order: one statement.

    An event the session does not store itself (a fork's shared prefix) is read through.
    """
    rows = conn.execute(
        "SELECT p.i, e.created_at FROM unnest(%(agents)s::text[], %(seqs)s::bigint[])"
        " WITH ORDINALITY AS p (a, q, i)"
        f" JOIN {s}.events AS e ON e.session_id = %(session)s AND e.agent_id = p.a"
        " AND e.seq = p.q",
        {
            "session": session_id,
            "agents": [agent for agent, _ in probes],
            "seqs": [seq for _, seq in probes],
        },
    ).fetchall()
    found = {int(i): str(stamp) for i, stamp in rows}
    return [
        found.get(i + 1) or event_created_at(conn, s, session_id, agent, seq)
        for i, (agent, seq) in enumerate(probes)
    ]


def insert_agents(
    conn: Connection, s: str, session_id: str, planned: Sequence[ForkedAgent], now: Any
) -> None:
    """The agents of a new fork, each counting the events it shares: one statement."""
    conn.execute(
        f"INSERT INTO {s}.agents (session_id, agent_id, parent_id, name, status, position,"
        " updated_at, event_count)"
        " SELECT %(session)s, a, p, n, st, pos, %(now)s, c FROM unnest(%(agents)s::text[],"
        " %(parents)s::text[], %(names)s::text[], %(statuses)s::text[], %(positions)s::bigint[],"
        " %(counts)s::bigint[]) WITH ORDINALITY AS f (a, p, n, st, pos, c, i) ORDER BY i",
        {
            "session": session_id,
            "now": now,
            "agents": [a.record.agent_id for a in planned],
            "parents": [a.record.parent_id for a in planned],
            "names": [a.record.name for a in planned],
            "statuses": [a.record.status for a in planned],
            "positions": [a.record.position for a in planned],
            "counts": [a.upto for a in planned],
        },
    )


def insert_fork(
    conn: Connection, s: str, session_id: str, source_id: str, planned: Sequence[ForkedAgent]
) -> None:
    """Point each agent of the new fork at its prefix of the original's log."""
    shared = [a for a in planned if a.upto > 0]
    if not shared:
        return
    conn.execute(
        f"INSERT INTO {s}.forks (session_id, agent_id, base_session, base_agent, upto)"
        " SELECT %(session)s, a, %(source)s, b, u"
        " FROM unnest(%(agents)s::text[], %(bases)s::text[], %(uptos)s::bigint[]) AS f (a, b, u)",
        {
            "session": session_id,
            "source": source_id,
            "agents": [a.record.agent_id for a in shared],
            "bases": [a.source_id for a in shared],
            "uptos": [a.upto for a in shared],
        },
    )


def detach_forks(conn: Connection, s: str, session_id: str) -> None:
    """Before the session is deleted: copy into every fork of it the rows it shares.

    Each fork takes over the session's blob references too, so the blobs of the prefix stay.
    """
    rows = conn.execute(
        f"SELECT session_id, agent_id, base_agent, upto FROM {s}.forks"
        " WHERE base_session = %(session)s",
        {"session": session_id},
    ).fetchall()
    for fork_session in sorted({row[0] for row in rows}):
        copy_refs(conn, s, session_id, fork_session)
    for fork_session, fork_agent, base_agent, upto in rows:
        params = {
            "session": session_id,
            "fork": fork_session,
            "agent": fork_agent,
            "base": base_agent,
            "upto": upto,
        }
        conn.execute(
            f"INSERT INTO {s}.events (session_id, agent_id, seq, type, data, created_at)"
            f" SELECT %(fork)s, %(agent)s, seq, type, data, created_at FROM {s}.events"
            " WHERE session_id = %(session)s AND agent_id = %(base)s AND seq < %(upto)s",
            params,
        )
        further = _base(conn, s, session_id, base_agent)
        if further is None:
            conn.execute(
                f"DELETE FROM {s}.forks WHERE session_id = %(fork)s AND agent_id = %(agent)s",
                params,
            )
        else:
            conn.execute(
                f"UPDATE {s}.forks SET base_session = %(to)s, base_agent = %(to_agent)s,"
                " upto = LEAST(upto, %(to_upto)s)"
                " WHERE session_id = %(fork)s AND agent_id = %(agent)s",
                {**params, "to": further[0], "to_agent": further[1], "to_upto": further[2]},
            )
