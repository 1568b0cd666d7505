"""The trace viewer: a stored session's agent tree as a timeline, in one self-contained HTML file.

`build_trace` reads a `StoredSession` into a `Trace`: one `Lane` per agent, parents before
their children, each with its spans (`Span`: turns, model requests, tool and subagent calls,
timed by their events' ``created_at``), its markers (`Marker`: suspensions, resumes, steering,
cancellations, errors, recoveries, user events) and its usage. `render_trace` turns a session
into the HTML page, and `write_trace` writes a stored session's page to a file. The page needs
no network: its data, script and styles are inline, so it opens from ``file://`` and can be
mailed around. The ``actors trace ID`` command does the same from the shell.

Example:
    >>> from actors import Agent, Runtime
    >>> from actors.store import MemoryStore
    >>> from actors.testing import ScriptedModel
    >>> from actors.trace import build_trace, render_trace
    >>> agent = Agent("assistant", model=ScriptedModel(["Hello!"]))
    >>> with MemoryStore() as store, Runtime() as runtime:
    ...     _ = runtime.spawn(agent, store=store, session_id="s1").run("Hi")
    ...     session = store.load("s1")
    >>> [(span.kind, span.status) for span in build_trace(session).lane("assistant").spans]
    [('turn', 'ok'), ('model', 'ok')]
    >>> render_trace(session).startswith("<!DOCTYPE html>")
    True
"""

from actors.trace._extract import build_trace
from actors.trace._model import SPAN_KINDS, SPAN_STATUSES, Lane, Marker, Span, Trace
from actors.trace._render import render_trace, write_trace

__all__ = [
    "build_trace",
    "Lane",
    "Marker",
    "render_trace",
    "Span",
    "SPAN_KINDS",
    "SPAN_STATUSES",
    "Trace",
    "write_trace",
]
