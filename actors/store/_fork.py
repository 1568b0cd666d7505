"""Forks of a session: where a consistent cut of a tree falls, and how a fork names its agents.

A fork (`SessionStore.fork`) is a new session holding a prefix of each agent's log of another
session. Where each prefix ends is a consistent cut of the tree, taken in time: the root keeps
its events up to and including the chosen one, every other agent those stamped before the
root's next event (the tree's agents share one clock; all of them when the chosen event is
the root's last), and an agent with no such event (spawned later) is left out, with every
agent under it. That is the state a crash just before the root's next event would have left,
so the restore that brings a fork up decides what was in flight as after a crash. Stores
share the prefixes by reference; this module holds what every store computes alike.

A fork's agents are renamed, so that the fork can run beside its original in one host: the
original root's id becomes the fork's root id, and a descendant's id (``<root>-sub-<n>...``)
keeps its suffix under the new root. The stored prefix keeps the ids it was written with; the
session's ``data["forks"]`` (`LINEAGE_KEY`) says, level by level, which events are read
through under old ids, and `rename_events` gives them the fork's ids when the runtime reads
them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from actors.exceptions import UserError
from actors.store._batch import check_id
from actors.store._records import AgentRecord

__all__ = [
    "FORK_KEY",
    "LINEAGE_KEY",
    "ForkedAgent",
    "check_fork_args",
    "fork_data",
    "fork_id",
    "plan_fork",
    "rename_events",
    "shared_upto",
]

LINEAGE_KEY: Final = "forks"
"""The key of a fork's session data that lists its lineage, oldest fork first."""

FORK_KEY: Final = "forked_from"
"""The key of a fork's session data naming the session and event it was cut from."""


@dataclass(frozen=True, slots=True)
class ForkedAgent:
    """One agent of a fork: its new record and the prefix of the original's log it shares.

    Attributes:
        record: The agent's record in the fork (renamed ids).
        source_id: The agent's id in the session forked from.
        upto: The fork shares the original's events with ``seq < upto``.
    """

    record: AgentRecord
    source_id: str
    upto: int


def fork_id(agent_id: str, old_root: str, new_root: str) -> str:
    """The id in a fork of the agent ``agent_id`` of a tree whose root was ``old_root``."""
    if agent_id == old_root:
        return new_root
    if agent_id.startswith(old_root + "-sub-"):
        return new_root + agent_id[len(old_root) :]
    return f"{new_root}:{agent_id}"  # not named after its root (never made by the runtime)


def check_fork_args(session_id: object, new_session_id: object, at: object) -> None:
    """Check the arguments of `SessionStore.fork`.

    Raises:
        UserError: An empty id, the same id twice, or an ``at`` that is not an int >= 0.
    """
    check_id("session_id", session_id)
    check_id("new_session_id", new_session_id)
    if session_id == new_session_id:
        raise UserError(f"fork needs a new session id, not the forked one ({session_id!r})")
    if at is not None and (type(at) is not int or at < 0):
        raise UserError(
            f"fork: at must be the seq (an int >= 0) of a root event or None, got {at!r}"
        )


def _when(text: str) -> datetime:
    # Parsed, not compared as text: pydantic leaves out zero microseconds.
    return datetime.fromisoformat(text)


def plan_fork(
    agents: Sequence[AgentRecord],
    root_id: str,
    new_root: str,
    at: int | None,
    last_seqs: Mapping[str, int],
    created_at: Callable[[Sequence[tuple[str, int]]], list[str]],
) -> list[ForkedAgent]:
    """The agents of a fork cut just after the root's event ``at`` (or of whole logs).

    Args:
        agents: The original's agents in spawn order.
        root_id: The original's root id.
        new_root: The fork's root id.
        at: The root's event to cut after; None keeps every log whole.
        last_seqs: Each agent's highest seq (-1, or missing, when its log is empty).
        created_at: The stored ``created_at`` of each ``(agent, seq)`` asked, in order (one
            call per step of the search, for every agent at once: one round trip).

    Raises:
        UserError: The root holds no event ``at``.
    """
    root_last = last_seqs.get(root_id, -1)
    if at is not None and at > root_last:
        raise UserError(
            f"fork: the root agent {root_id!r} has no event {at} (its last is {root_last}); "
            "`actors sessions log` lists the events with their seqs"
        )
    ends = {r.agent_id: last_seqs.get(r.agent_id, -1) + 1 for r in agents}
    if at is not None:
        ends[root_id] = at + 1
        if at < root_last:
            # Everything stamped before the root's next event: what a crash just before that
            # event would have left (after the root's last event: everything).
            (stamp,) = created_at([(root_id, at + 1)])
            others = {a: end for a, end in ends.items() if a != root_id}
            ends.update(_counts_before(others, _when(stamp), created_at))
    kept: dict[str, ForkedAgent] = {}
    for record in agents:
        upto = ends[record.agent_id]
        if record.agent_id != root_id:
            if record.parent_id is None or record.parent_id not in kept:
                continue  # under an agent left out (or a second root): not in the tree
            if upto == 0 and at is not None:
                continue  # spawned after the cut
        cut_short = upto <= last_seqs.get(record.agent_id, -1)
        renamed = AgentRecord(
            fork_id(record.agent_id, root_id, new_root),
            None if record.parent_id is None else fork_id(record.parent_id, root_id, new_root),
            record.name,
            # Cut short, the agent was busy at the cut: the restore decides what it was doing.
            "running" if cut_short else record.status,
            record.position,
        )
        kept[record.agent_id] = ForkedAgent(renamed, record.agent_id, upto)
    return list(kept.values())


def _counts_before(
    ends: Mapping[str, int],
    cut: datetime,
    created_at: Callable[[Sequence[tuple[str, int]]], list[str]],
) -> dict[str, int]:
    """For each agent, how many of its first events are stamped before ``cut``.

    A binary search on seq (an agent's events are stamped in seq order), every agent's in
    lockstep, so that each step is one batch of reads.
    """
    bounds = {agent: [0, end] for agent, end in ends.items()}  # the answer is in [low, high]
    while True:
        probes = [(a, (low + high) // 2) for a, (low, high) in bounds.items() if low < high]
        if not probes:
            return {agent: low for agent, (low, _) in bounds.items()}
        for (agent, middle), stamp in zip(probes, created_at(probes), strict=True):
            if _when(stamp) < cut:
                bounds[agent][0] = middle + 1
            else:
                bounds[agent][1] = middle


def fork_data(
    source_data: Mapping[str, Any],
    source_id: str,
    at: int | None,
    old_root: str,
    new_root: str,
    planned: Sequence[ForkedAgent],
) -> dict[str, Any]:
    """The session data of a fork: the original's, with the lineage extended by this fork."""
    cuts = {a.source_id: a.upto for a in planned}
    lineage: list[dict[str, Any]] = []
    for level in source_data.get(LINEAGE_KEY) or ():
        # The original's levels, re-keyed to the fork's ids and clipped to its prefixes.
        level_cuts = {
            fork_id(agent, old_root, new_root): min(int(upto), cuts[agent])
            for agent, upto in dict(level.get("cuts") or {}).items()
            if agent in cuts
        }
        lineage.append({**level, "cuts": level_cuts})
    lineage.append(
        {
            "session": source_id,
            "at": at,
            "from": old_root,
            "to": new_root,
            "cuts": {a.record.agent_id: a.upto for a in planned},
        }
    )
    data = {k: v for k, v in source_data.items() if k not in (LINEAGE_KEY, FORK_KEY)}
    data[FORK_KEY] = {"session": source_id, "at": at}
    data[LINEAGE_KEY] = lineage
    json.dumps(data)  # plain JSON by construction; fails loudly if not
    return data


def shared_upto(session_data: Mapping[str, Any], agent_id: str) -> int:
    """How many of the agent's first events a fork reads through from its original (0 if none)."""
    lineage = session_data.get(LINEAGE_KEY)
    if not lineage:
        return 0
    return int((lineage[-1].get("cuts") or {}).get(agent_id, 0))


# The fields of logged events that hold agent ids (see the loop's `_record` calls).
_ID_FIELDS: Final = ("child_id", "to", "from", "agent_id")


def rename_events(
    session_data: Mapping[str, Any], agent_id: str, events: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``events`` (as loaded) of a fork's agent, with the ids of read-through events renamed.

    Events of a session that is no fork, or written by the fork itself, come back unchanged.
    """
    lineage = session_data.get(LINEAGE_KEY)
    if not lineage:
        return events
    levels = [
        (str(level["from"]), str(level["to"]), int(level["cuts"][agent_id]))
        for level in lineage
        if agent_id in (level.get("cuts") or {})
    ]
    if not levels or levels[-1][2] == 0:
        return events
    renamed = []
    for event in events:
        seq = event["seq"]
        data = event["data"]
        for old, new, upto in levels:
            if seq < upto and old != new:
                data = _renamed(data, old, new)
        renamed.append(event if data is event["data"] else {**event, "data": data})
    return renamed


def _renamed(data: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    def one(value: Any) -> Any:
        if isinstance(value, str) and (value == old or value.startswith(old + "-sub-")):
            return fork_id(value, old, new)
        return value

    out = dict(data)
    for key in _ID_FIELDS:
        if key in out:
            out[key] = one(out[key])
    message_id = out.get("message_id")
    if isinstance(message_id, str) and ":" in message_id:
        sender, _, number = message_id.rpartition(":")
        out["message_id"] = f"{one(sender)}:{number}"
    request = out.get("request")
    if isinstance(request, dict):
        request = dict(request)
        request["agent_id"] = one(request.get("agent_id"))
        if isinstance(request.get("path"), list):
            request["path"] = [one(part) for part in request["path"]]
        out["request"] = request
    return out
