"""OpenTelemetry spans for agent trees, following the GenAI semantic conventions.

`instrument` turns tracing on for every agent of the process: each run is an
``invoke_agent {agent}`` span, each model request a ``chat {model}`` span inside it, each tool
or subagent call an ``execute_tool {tool}`` span; a subagent's run is a child of the call that
started it, so a whole tree is one trace, across threads and hosts. Suspensions, resumes,
steering, cancellations, passivation and errors are span events and statuses. Spans are made
from each agent's event log as it is written (its events' times are the spans' times), which
is also how `export_session` sends a stored session to a tracing backend after the fact.

Message content (prompts, replies, tool arguments and results) is recorded only when asked
(``capture_content=True`` or ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``); a
`tool_context` never is. Needs the ``actors[otel]`` extra (``opentelemetry-api``); ``import
actors`` alone never imports OpenTelemetry, and with tracing off an event costs one check.

Example:
    >>> from opentelemetry.sdk.trace import TracerProvider
    >>> from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    >>> from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    >>> from actors import Agent, Runtime
    >>> from actors.otel import instrument, uninstrument
    >>> from actors.testing import ScriptedModel
    >>> exporter = InMemorySpanExporter()
    >>> provider = TracerProvider()
    >>> provider.add_span_processor(SimpleSpanProcessor(exporter))
    >>> instrument(provider)
    >>> with Runtime() as runtime:
    ...     _ = runtime.spawn(Agent("hello", model=ScriptedModel(["Hi!"]))).run("Hello?")
    >>> uninstrument()
    >>> sorted(span.name for span in exporter.get_finished_spans())
    ['chat scripted', 'invoke_agent hello']
"""

from actors.otel._require import require_opentelemetry

require_opentelemetry()

from actors.otel._export import export_session  # noqa: E402
from actors.otel._instrument import CAPTURE_ENV, instrument, uninstrument  # noqa: E402

__all__ = ["CAPTURE_ENV", "export_session", "instrument", "uninstrument"]
