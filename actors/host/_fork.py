"""Fork and rewind of a persisted tree: a consistent cut of its logs, brought up as a session.

`Runtime.fork` and `Runtime.rewind` are built from `SessionStore.fork` (which shares the
prefix of each log by reference) and the restore (which brings the cut up without running
anything again: each call in flight at the cut is closed as not started or of unknown outcome,
open requests stay open).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable

from actors.exceptions import SessionNotFoundError, UserError
from actors.store._protocol import SessionStore, has_session

__all__ = ["abandoned_id", "fork_id_for", "make_fork", "make_rewind"]


def fork_id_for(session_id: str, new_id: str | None) -> str:
    """The fork's session id (its root agent's id too): ``new_id``, or a new one.

    Raises:
        UserError: ``new_id`` is not a non-empty string or None.
    """
    if new_id is None:
        return f"{session_id}-fork-{uuid.uuid4().hex[:8]}"
    if not isinstance(new_id, str) or not new_id:
        raise UserError(f"fork: new_id must be a non-empty string or None, got {new_id!r}")
    return new_id


def abandoned_id(store: SessionStore, session_id: str) -> str:
    """A free session id to keep the branch a rewind abandons: ``<id>-rewound-<n>``."""
    n = 1
    while has_session(store, f"{session_id}-rewound-{n}"):
        n += 1
    return f"{session_id}-rewound-{n}"


def make_fork(store: SessionStore, session_id: str, new_id: str, at: int) -> None:
    """Fork ``session_id`` into ``new_id`` (whose root gets that id) in the store."""
    if has_session(store, new_id):
        raise UserError(f"fork: session {new_id!r} exists already; pass another new_id")
    store.fork(session_id, new_id, at=at, root_agent_id=new_id)


def make_rewind(
    store: SessionStore, session_id: str, at: int, keep_as: str | None
) -> tuple[str, Callable[[], None]]:
    """Rewind ``session_id`` in the store to just after its root's event ``at``.

    The whole session is first kept, shared, as ``keep_as`` (the abandoned branch, readable);
    then the session is forked back from it at ``at`` under its own id and root id.

    Returns the abandoned branch's id, and an undo that puts the session back if bringing it
    up fails.

    Raises:
        SessionNotFoundError: No such session.
        UserError: ``at`` is not a seq of the root's log, or ``keep_as`` is taken.
    """
    head = store.load(session_id, snapshots=True)  # the root id; snapshots keep it small
    root_id = head.root_agent_id
    last = store.last_seq(session_id, root_id)
    if type(at) is not int or not 0 <= at <= last:
        raise UserError(
            f"rewind: at must be a seq of the root's log (0 to {last}), got {at!r}; "
            "`actors sessions log` lists them"
        )
    kept = keep_as if keep_as is not None else abandoned_id(store, session_id)
    if has_session(store, kept):
        raise UserError(f"rewind: session {kept!r} exists already; pass another keep_as")
    store.fork(session_id, kept, at=None, root_agent_id=root_id)
    store.delete(session_id)  # its rows move to the kept branch, which stays whole
    try:
        store.fork(kept, session_id, at=at, root_agent_id=root_id)
    except BaseException:
        store.fork(kept, session_id, at=None, root_agent_id=root_id)
        store.delete(kept)
        raise

    def undo() -> None:
        with contextlib.suppress(SessionNotFoundError):  # half-made: nothing to delete
            store.delete(session_id)
        store.fork(kept, session_id, at=None, root_agent_id=root_id)
        store.delete(kept)

    return kept, undo
