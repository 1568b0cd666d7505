"""Tracing on for one test, into the SDK's in-memory exporter."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from actors.otel import instrument, uninstrument

from .helpers import Spans


@pytest.fixture
def tracing() -> Iterator[Callable[..., Spans]]:
    """``tracing(capture_content=...)`` turns tracing on for the test and returns its spans."""
    providers: list[TracerProvider] = []

    def start(**options: Any) -> Spans:
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        providers.append(provider)
        instrument(provider, **options)
        return Spans(exporter)

    yield start
    uninstrument()
    for provider in providers:
        provider.shutdown()


@pytest.fixture
def spans(tracing: Callable[..., Spans]) -> Spans:
    """Tracing on, without message content."""
    return tracing()
