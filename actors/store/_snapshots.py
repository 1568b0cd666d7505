"""What every store does the same way with snapshots: check and encode one, decode one.

A store keeps one snapshot per agent (the latest written) as its ``seq`` and its JSON text. It
does not read what is inside beyond ``seq``: the runtime checks a snapshot against the log
(see `actors.context._snapshot`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from actors.exceptions import UserError
from actors.store._blobs import Blob, has_refs, inline

__all__ = ["decode_snapshot", "encode_snapshot"]

_encoder = json.JSONEncoder(allow_nan=False, separators=(",", ":"))


def encode_snapshot(session_id: str, agent_id: str, snapshot: object) -> tuple[int, str]:
    """A snapshot's ``seq`` and JSON text.

    Raises:
        UserError: It is not a mapping of plain JSON with an int ``seq`` >= 0.
    """
    where = f"the snapshot of agent {agent_id!r} of session {session_id!r}"
    if not isinstance(snapshot, Mapping):
        raise UserError(f"{where} must be a mapping of plain JSON, got {type(snapshot).__name__}")
    seq = snapshot.get("seq")
    if type(seq) is not int or seq < 0:
        raise UserError(f"{where} needs an int 'seq' >= 0 (the first event read with it)")
    try:
        # No copy first: the runtime's snapshots are plain JSON by construction, and a copy of
        # a long transcript would cost as much as the encoding.
        return seq, _encoder.encode(snapshot)
    except (TypeError, ValueError, RecursionError) as exc:
        raise UserError(f"{where} is not plain JSON: {exc}") from None


def decode_snapshot(text: object, blobs: Mapping[str, Blob] | None = None) -> dict[str, Any]:
    """A stored snapshot; an empty dict when its text is not a JSON object (it is ignored).

    ``blobs``: what its parts refer to (see `actors.store._blobs`); a snapshot that refers to
    a missing blob is ignored too (the log restores the context without it).
    """
    if not isinstance(text, str):
        return {}
    try:
        value = json.loads(text)
        if blobs is not None and has_refs(text):
            value = inline(value, blobs)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}
