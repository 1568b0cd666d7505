"""A stored session as a trace, after the fact: `export_session`."""

from __future__ import annotations

from opentelemetry.trace import TracerProvider

from actors import AgentContext
from actors.exceptions import UserError
from actors.otel._instrument import _capture, make_tracer
from actors.otel._reading import read
from actors.otel._spans import AgentInfo, TreeSpans
from actors.store import SessionStore

__all__ = ["export_session"]


def export_session(
    store: SessionStore,
    session_id: str,
    tracer_provider: TracerProvider | None = None,
    *,
    capture_content: bool | None = None,
) -> int:
    """Send a stored session's whole tree to OpenTelemetry, as `instrument` would have live.

    The spans are made from the agents' logs, parents before children, with the times of the
    events, so a session that ran without tracing (or in another process) can be looked at in
    any tracing backend afterwards. A run left open in the log (suspended, or cut short by a
    crash) becomes a span that ends at its agent's last event.

    Args:
        store: The store that holds the session.
        session_id: The session.
        tracer_provider: Where spans go; the global provider by default. Flush it
            (``force_flush()``) before the process exits.
        capture_content: As for `instrument`.

    Returns:
        How many agents' logs were read.

    Raises:
        SessionNotFoundError: No such session in the store.
        SerializationError: An agent's stored context cannot be read.
        UserError: ``store`` is not a `SessionStore`, or a bad ``tracer_provider`` or
            ``capture_content``.
    """
    if not isinstance(store, SessionStore):
        raise UserError(f"export_session needs a SessionStore, got {type(store).__name__}")
    tree = TreeSpans(make_tracer(tracer_provider), _capture(capture_content))
    session = store.load(session_id)
    count = 0
    for stored, _ in session.tree_order():
        context = AgentContext.deserialize(stored.context)
        record = stored.record
        spans = tree.agent(AgentInfo(record.agent_id, record.name, record.parent_id, session_id))
        for event in context.events:
            read(spans, event)
        if spans.run is not None:  # still open in the log: it ends with the log
            spans.end_run(spans.last, record.status, None, None)
        count += 1
    return count
