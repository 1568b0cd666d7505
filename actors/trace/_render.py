"""Writing a `Trace` as one self-contained HTML page: the data as JSON, the viewer inline."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from actors import Usage, __version__
from actors._files import write_whole
from actors.store import SessionStore, StoredSession
from actors.trace._extract import build_trace
from actors.trace._media import Media
from actors.trace._model import Lane, Span, Trace

__all__ = ["render_trace", "write_trace"]  # branches_of: for the command only

_SLOT = re.compile(r"@@([A-Z]+)@@")
# JSON never needs these characters outside strings, so escaping them there is lossless, and
# the embedded data can never close its <script> element or open a comment or a tag.
_UNSAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_UNSAFE_RE = re.compile("[<>&\u2028\u2029]")


def render_trace(
    session: StoredSession | Trace, *, branches: Sequence[tuple[str, int]] = ()
) -> str:
    """The trace viewer page of a session: one self-contained HTML document.

    The page shows one lane per agent (parents before their children) with its turns, model
    requests, tool and subagent calls as bars and its suspensions, resumes, steering,
    cancellations, errors and recoveries as markers; clicking one shows its events' payloads,
    with images in messages as thumbnails and other parts (audio, documents, images over
    2 MB) as placeholders: no part's base64 is in the page but an embedded image's, once.
    Usage per agent and for the tree comes last. Everything (data, script, styles) is inline,
    and the page's content security policy forbids any request, so it works from ``file://``
    with no network. The events are embedded once, as JSON, and drawn by a small script.

    Args:
        session: A loaded session (`SessionStore.load`), or a `Trace` built from one.
        branches: For a loaded session: its forks (id, and the root's seq each was cut
            after), marked on the root's lane and linked from the header.

    Returns:
        The HTML text.

    Raises:
        SerializationError: An agent's stored context cannot be read.
    """
    trace = session if isinstance(session, Trace) else build_trace(session, branches)
    script = _asset("viewer.js")
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    # Only the viewer's own script may run (by its hash): no inline handler, no other script.
    # Images only from data: URLs, the thumbnails the page embeds: nothing is fetched.
    policy = (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
    )
    values = {
        "POLICY": policy,
        "VERSION": __version__,
        "TITLE": html.escape(f"actors trace {trace.session_id}"),
        "STYLE": _asset("viewer.css"),
        "DATA": _json_for_script(_page_data(trace)),
        "SCRIPT": script,
    }
    # One pass over the template: text put in a slot is never searched for slots again.
    return _SLOT.sub(lambda match: values[match.group(1)], _asset("viewer.html"))


def write_trace(store: SessionStore, session_id: str, path: str | os.PathLike[str]) -> Path:
    """Write the trace viewer page of a stored session to ``path``.

    The forks of the session in ``store`` are marked where they were cut and linked (as
    ``trace-<fork id>.html`` beside it, the name ``actors trace`` gives them).

    Args:
        store: The store that holds the session.
        session_id: The session's id.
        path: The HTML file to write (replaced if it exists).

    Returns:
        The path written.

    Raises:
        SessionNotFoundError: The store has no such session.
        SerializationError: An agent's stored context cannot be read.
        OSError: The file cannot be written.
    """
    page = render_trace(store.load(session_id), branches=branches_of(store, session_id))
    target = Path(path)
    write_whole(target, page)
    return target


def branches_of(store: SessionStore, session_id: str) -> list[tuple[str, int]]:
    """The forks of a session in ``store``: each one's id and the root's seq it was cut after."""
    found = []
    for info in store.list_sessions():
        origin = info.data.get("forked_from")
        if isinstance(origin, dict) and origin.get("session") == session_id:
            at = origin.get("at")
            if isinstance(at, int):
                found.append((info.session_id, at))
    return sorted(found, key=lambda branch: (branch[1], branch[0]))


@cache
def _asset(name: str) -> str:
    return resources.files("actors.trace").joinpath(name).read_text(encoding="utf-8")


def _json_for_script(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (a session built by hand, or by a store that does not repair old
        # logs): escaped, the page stays valid UTF-8 and the browser shows U+FFFD for it.
        text = json.dumps(value, separators=(",", ":"))
    return _UNSAFE_RE.sub(lambda match: _UNSAFE[match.group(0)], text)


def _micros(moment: datetime) -> int:
    """Microseconds since the epoch, exactly (a float of seconds would round them)."""
    if moment.tzinfo is None:  # a clock that gave naive times: read them as UTC
        moment = moment.replace(tzinfo=UTC)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _usage(usage: Usage) -> list[int]:
    return [usage.requests, usage.input_tokens, usage.output_tokens, usage.tool_calls]


def _ranges(seqs: tuple[int, ...]) -> list[int]:
    """Seqs as flat inclusive ranges, ``[first, last, first, last, ...]``: a turn is one."""
    out: list[int] = []
    for seq in seqs:
        if out and seq == out[-1] + 1:
            out[-1] = seq
        else:
            out.extend((seq, seq))
    return out


def _page_data(trace: Trace) -> dict[str, Any]:
    """What the page's script reads: compact arrays, times in microseconds from the start."""
    start = trace.start
    t0 = _micros(start) if start is not None else 0
    end = trace.end
    media = Media()
    lanes = [_lane_data(lane, t0, media) for lane in trace.lanes]
    return {
        "version": 1,
        "session": {
            "id": trace.session_id,
            "root": trace.root_agent_id,
            "t0": t0,
            "duration": _micros(end) - t0 if end is not None else 0,
            "events": trace.event_count,
            "forkedFrom": list(trace.forked_from) if trace.forked_from else None,
            "branches": [list(branch) for branch in trace.branches],
        },
        "total": _usage(trace.usage),
        "lanes": lanes,
        "media": media.urls,
    }


def _lane_data(lane: Lane, t0: int, media: Media) -> dict[str, Any]:
    def at(moment: datetime) -> int:
        return _micros(moment) - t0

    def span(s: Span) -> list[Any]:
        return [s.kind, at(s.start), at(s.end), s.label, s.status, _ranges(s.seqs), s.child_id]

    return {
        "id": lane.agent_id,
        "name": lane.name,
        "parent": lane.parent_id,
        "status": lane.status,
        "depth": lane.depth,
        "usage": _usage(lane.usage),
        "events": [[e.seq, e.type, at(e.created_at), media.payload(e.data)] for e in lane.events],
        "spans": [span(s) for s in lane.spans],
        "markers": [[m.kind, at(m.at), m.label, m.seq] for m in lane.markers],
    }
