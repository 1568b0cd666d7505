"""Turning tracing on and off, what it costs nothing when off, and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NoOpTracerProvider, Span, Tracer
from structlog.testing import capture_logs

from actors import Agent, Runtime
from actors.exceptions import SessionNotFoundError, UserError
from actors.otel import export_session, instrument, uninstrument
from actors.store import MemoryStore
from actors.testing import ScriptedModel

from .helpers import Spans


def hello() -> Agent:
    return Agent("hello", model=ScriptedModel(["Hi!", "Hi again!"]))


def run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_import_actors_never_imports_opentelemetry() -> None:
    out = run(
        """
        import sys
        import actors
        from actors import Agent, Runtime
        from actors.testing import ScriptedModel
        with Runtime() as runtime:
            runtime.spawn(Agent("a", model=ScriptedModel(["Hi"]))).run("Hello")
        print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
        """
    )
    assert out.strip() == "[]"


def test_without_the_api_the_error_names_the_extra() -> None:
    out = run(
        """
        import sys
        sys.modules["opentelemetry"] = None  # as if opentelemetry-api were not installed
        try:
            import actors.otel
        except ImportError as exc:
            print(exc)
        """
    )
    assert "pip install 'actors[otel]'" in out


def test_the_global_provider_by_default() -> None:
    out = run(
        """
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from actors import Agent, Runtime
        from actors.otel import instrument
        from actors.testing import ScriptedModel

        instrument()  # before the provider is set: spans go to it once it is
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        with Runtime() as runtime:
            runtime.spawn(Agent("a", model=ScriptedModel(["Hi"]))).run("Hello")
        spans = exporter.get_finished_spans()
        print(sorted((s.name, s.instrumentation_scope.name) for s in spans))
        """
    )
    assert out.strip() == "[('chat scripted', 'actors'), ('invoke_agent a', 'actors')]"


def test_uninstrument_stops_the_spans(spans: Spans) -> None:
    with Runtime() as runtime:
        ref = runtime.spawn(hello())
        ref.run("Hi")
        uninstrument()
        uninstrument()  # twice is fine
        ref.run("Again")
    assert [s.name for s in spans.all if s.name.startswith("invoke")] == ["invoke_agent hello"]


def test_instrument_again_replaces_the_provider(tracing: Callable[..., Spans]) -> None:
    first = tracing()
    second = tracing()
    with Runtime() as runtime:
        runtime.spawn(hello()).run("Hi")
    assert first.all == ()
    assert len(second.all) == 2


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(UserError, match="TracerProvider"):
        instrument("console")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="capture_content"):
        instrument(TracerProvider(), capture_content="yes")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="SessionStore"):
        export_session("sessions.db", "s1")  # type: ignore[arg-type]
    with MemoryStore() as store, pytest.raises(SessionNotFoundError):
        export_session(store, "no-such-session", TracerProvider())


class _Broken(Tracer):
    def start_span(self, *args: object, **kwargs: object) -> Span:
        raise RuntimeError("the tracing backend is broken")

    def start_as_current_span(self, *args: object, **kwargs: object) -> object:  # type: ignore[override]
        raise RuntimeError("the tracing backend is broken")


class _BrokenProvider(NoOpTracerProvider):
    def get_tracer(self, *args: object, **kwargs: object) -> Tracer:
        return _Broken()


def test_a_broken_tracer_never_breaks_an_agent() -> None:
    instrument(_BrokenProvider())
    try:
        with capture_logs() as logs, Runtime() as runtime:
            assert runtime.spawn(hello()).run("Hi").output == "Hi!"
    finally:
        uninstrument()
    assert any(entry["event"] == "tree observer failed" for entry in logs)


@pytest.mark.timeout(120)
def test_the_overhead_bench_runs(tmp_path: Path) -> None:
    out = tmp_path / "otel.json"
    done = subprocess.run(
        [sys.executable, "bench/otel_overhead.py", "--quick", "--json", str(out)],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(out.read_text())
    assert figures["single"]["spans"] > 0
    assert 0 < figures["single"]["off_s"] < 1.0
