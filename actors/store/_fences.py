"""Fencing: which store instance may write an agent, after a host took the agent over.

`SessionStore.acquire` makes one instance a whole session's only writer. The hosts of a
`RayRuntime` write one session together (a child spread to another machine writes its own
log), so they cannot hold it; and when a host dies and another takes over its agents, the
host that died may not be dead at all (paused, cut off by the network), and must never write
again. A fence says so, agent by agent: `fence` records, in the store, that one instance is the
agent's only writer from now on, at an epoch one higher than any fence of the session before.
A write to a fenced agent through any other instance raises `FencedWriteError` and writes
nothing, so the instance fenced out can neither append to the agent's log nor start a run
(a run's first event is a write). Agents nobody fenced are written as before.

The built-in stores have a ``fence`` method; `fence` here calls it, and does nothing for a
store without one.
"""

from __future__ import annotations

from collections.abc import Sequence

from actors.exceptions import FencedWriteError, UserError

__all__ = ["check_fence_ids", "fence", "fenced"]


def fence(store: object, session_id: str, agent_ids: Sequence[str] | None = None) -> int | None:
    """Make ``store`` the only writer of agents of a session; their new epoch, or None.

    Args:
        store: The store instance that takes the agents over.
        session_id: Their session (it must exist).
        agent_ids: The agents (each must be put already), or None for every agent the session
            holds now.

    Returns:
        The new epoch (one more than any fence of the session before), or None when the
        store cannot fence (it has no ``fence`` method).

    Raises:
        SessionNotFoundError: The session does not exist.
        SessionBusyError: Another live store instance holds the session.
        StoreError: An agent that is not part of the session.
    """
    own = getattr(store, "fence", None)
    if own is None:
        return None
    epoch = own(session_id, agent_ids)
    assert isinstance(epoch, int)
    return epoch


def check_fence_ids(agent_ids: Sequence[str] | None) -> list[str] | None:
    """The ids a ``fence`` call names, checked: a sequence of non-empty strs, or None."""
    if agent_ids is None:
        return None
    if isinstance(agent_ids, str) or not isinstance(agent_ids, Sequence):
        raise UserError(f"fence takes a sequence of agent ids or None, got {agent_ids!r}")
    ids = list(dict.fromkeys(agent_ids))
    for agent_id in ids:
        if not isinstance(agent_id, str) or not agent_id:
            raise UserError(f"fence takes non-empty agent ids, got {agent_id!r}")
    return ids


def fenced(session_id: str, agent_id: str, epoch: int, where: str) -> FencedWriteError:
    """The error for a write refused because another instance fenced the agent."""
    return FencedWriteError(
        f"agent {agent_id!r} of session {session_id!r} in {where} was taken over by another "
        f"store instance (fence epoch {epoch}); this instance may no longer write it and "
        "nothing was written. Its host must stop the agent: it runs elsewhere now",
        session_id,
        agent_id,
        epoch,
    )
