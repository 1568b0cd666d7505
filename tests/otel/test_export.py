"""A stored session exported after the fact is the trace tracing would have made live."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from actors import Agent, Answer, Runtime
from actors.otel import export_session
from actors.store import SQLiteStore

from .helpers import Spans, attrs
from .team import team
from .test_outcomes import ops_team


def shape(spans: Spans) -> list[Any]:
    """Every span with its path of names from the root, kind, times, attributes and events."""

    def path(span: ReadableSpan) -> tuple[str, ...]:
        parent = spans.parent(span)
        return (*path(parent), span.name) if parent is not None else (span.name,)

    out = [
        (
            path(s),
            s.kind,
            s.start_time,
            s.end_time,
            s.status.status_code,
            sorted(attrs(s).items()),
            [(e.name, e.timestamp) for e in s.events],
        )
        for s in spans.all
    ]
    return sorted(out, key=repr)


def exported(store: SQLiteStore, session_id: str, **options: Any) -> Spans:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    export_session(store, session_id, provider, **options)
    provider.shutdown()
    return Spans(exporter)


def test_an_exported_session_matches_the_live_trace(spans: Spans, tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "sessions.db") as store:
        with Runtime() as runtime:
            runtime.spawn(team(), store=store, session_id="research").run("Research.")
        after = exported(store, "research")
    assert len(after.all) == len(spans.all) == 17
    assert shape(after) == shape(spans)
    roots = [s for s in after.all if s.parent is None]
    assert [s.name for s in roots] == ["invoke_agent lead"]  # one trace


def test_a_suspended_session_exports_with_its_suspension(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "sessions.db") as store:
        with Runtime() as runtime:
            ref = runtime.spawn(ops_team(), store=store, session_id="ship")
            (request,) = ref.run("Ship it.").requests
        waiting = exported(store, "ship")
        with Runtime() as runtime:
            ref = runtime.restore("ship", store=store, agents=[ops_team()])
            assert ref.resume({request.id: Answer(ok=True)}).output == "Shipped."
        done = exported(store, "ship", capture_content=True)

    # still waiting: the open runs end with the log, saying so
    lead = waiting.one("invoke_agent lead")
    assert attrs(lead)["actors.run.outcome"] == "suspended"
    ops = waiting.one("invoke_agent ops")
    assert "actors.suspended" in [e.name for e in ops.events]
    # answered after a restore: the same runs, now finished, with the content asked for
    lead = done.one("invoke_agent lead")
    assert attrs(lead)["actors.run.outcome"] == "completed"
    assert "gen_ai.output.messages" in attrs(lead)
    deploy = done.one("execute_tool deploy")
    assert [e.name for e in deploy.events] == ["actors.suspended", "actors.resumed"]
    assert attrs(deploy)["gen_ai.tool.call.result"] == "deployed 1.2"


def test_a_session_that_ran_twice_exports_both_runs(tmp_path: Path) -> None:
    from actors.testing import ScriptedModel

    assistant = Agent("assistant", model=ScriptedModel(["Hello!", "Still here."]))
    with SQLiteStore(tmp_path / "sessions.db") as store:
        with Runtime() as runtime:
            ref = runtime.spawn(assistant, store=store, session_id="chat")
            ref.run("Hi")
            ref.run("Still there?")
        after = exported(store, "chat")
    runs = after.named("invoke_agent assistant")
    assert sorted(attrs(s)["actors.run.id"] for s in runs) == ["assistant-run-1", "assistant-run-2"]
    assert len({s.context.trace_id for s in runs}) == 2
