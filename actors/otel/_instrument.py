"""Turning tracing on and off for every agent of the process: `instrument`, `uninstrument`."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Tracer, TracerProvider

from actors import Event, __version__
from actors.exceptions import UserError
from actors.host import AgentNode, current_observer, set_tree_observer
from actors.otel._reading import read, restore
from actors.otel._spans import AgentInfo, AgentSpans, TreeSpans

__all__ = [
    "CAPTURE_ENV",
    "SCOPE",
    "SpanObserver",
    "capture_from_env",
    "instrument",
    "make_tracer",
    "uninstrument",
]

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The environment variable of the GenAI conventions that opts in to message content."""

SCOPE = "actors"
"""The instrumentation scope (tracer name) of every span the library makes."""

_TRUE = frozenset({"true", "1", "yes", "on", "span_only", "span_and_event"})
_lock = threading.Lock()


def capture_from_env() -> bool:
    """Whether `CAPTURE_ENV` opts in to message content (``true``; unset means no)."""
    return os.environ.get(CAPTURE_ENV, "").strip().lower() in _TRUE


def make_tracer(tracer_provider: TracerProvider | None) -> Tracer:
    """The library's tracer from ``tracer_provider``, or from the global provider.

    Raises:
        UserError: ``tracer_provider`` is not a `TracerProvider`.
    """
    if tracer_provider is not None and not isinstance(tracer_provider, TracerProvider):
        raise UserError(
            "tracer_provider must be an opentelemetry TracerProvider (e.g. "
            f"opentelemetry.sdk.trace.TracerProvider()), got {type(tracer_provider).__name__}"
        )
    return trace.get_tracer(SCOPE, __version__, tracer_provider=tracer_provider)


def _capture(capture_content: object) -> bool:
    if capture_content is None:
        return capture_from_env()
    if not isinstance(capture_content, bool):
        raise UserError(
            f"capture_content takes True, False or None (read {CAPTURE_ENV}), "
            f"got {capture_content!r}"
        )
    return capture_content


def instrument(
    tracer_provider: TracerProvider | None = None, *, capture_content: bool | None = None
) -> None:
    """Make OpenTelemetry spans for every agent run, model request and tool call of the process.

    From now on each run of any agent, on any `Runtime` or `SyncDriver`, is an
    ``invoke_agent {name}`` span; each model request a ``chat {model}`` span in it, each tool
    or subagent call an ``execute_tool {name}`` span; a subagent's run goes under the call that
    started it, so a tree is one trace. Spans follow the OpenTelemetry GenAI semantic
    conventions and are made from each agent's event log as it is written. Calling it again
    replaces the settings (spans already open are dropped: call it once, at startup).

    Args:
        tracer_provider: Where spans go; the global provider (``trace.set_tracer_provider``)
            by default.
        capture_content: Also record message content: prompts, model replies, tool arguments
            and results (``gen_ai.input.messages`` and the like). They may hold personal data,
            so it is off by default; None reads ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_
            CONTENT`` (``true`` turns it on). A `tool_context` is never recorded.

    Raises:
        UserError: ``tracer_provider`` is not a `TracerProvider`, or ``capture_content`` not
            a bool or None.
    """
    observer = SpanObserver(make_tracer(tracer_provider), _capture(capture_content))
    with _lock:
        set_tree_observer(observer)


def uninstrument() -> None:
    """Stop making spans (spans still open are dropped). Does nothing if not instrumented."""
    with _lock:
        if isinstance(current_observer(), SpanObserver):
            set_tree_observer(None)


def _now() -> int:
    return time.time_ns()


class SpanObserver:
    """The tree observer behind `instrument`: each tree's spans live in its ``Tree.observed``."""

    def __init__(self, tracer: Tracer, capture: bool) -> None:
        self.tracer = tracer
        self.capture = capture

    def _spans(self, node: AgentNode) -> AgentSpans:
        tree = node.tree
        state = tree.observed
        if not isinstance(state, TreeSpans) or state.owner is not self:
            with tree.lock:
                state = tree.observed
                if not isinstance(state, TreeSpans) or state.owner is not self:
                    state = tree.observed = TreeSpans(self.tracer, self.capture, owner=self)
        spans = state.agents.get(node.agent_id)
        return spans if spans is not None else state.agent(self._info(node))

    def _info(self, node: AgentNode) -> AgentInfo:
        instructions: Any = getattr(node.spec, "instructions", None)
        return AgentInfo(
            node.agent_id,
            node.name,
            node.parent_id,
            node.session_id,
            instructions if self.capture and isinstance(instructions, str) else None,
        )

    def on_event(self, node: AgentNode, event: Event) -> None:
        """Fold the event into its agent's spans."""
        read(self._spans(node), event)

    def on_restore(self, node: AgentNode, events: Sequence[Event]) -> None:
        """Read the restored log; an open run continues in a new span."""
        restore(self._spans(node), events, _now())

    def on_release(self, node: AgentNode, how: str) -> None:
        """Close what the agent left open, and forget it."""
        state = node.tree.observed
        if isinstance(state, TreeSpans) and state.owner is self:
            state.forget(node.agent_id)
            spans = state.agents.pop(node.agent_id, None)
            if spans is not None:
                spans.release(max(_now(), spans.last), how, node.status)
