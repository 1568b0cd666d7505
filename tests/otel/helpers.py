"""Reading the finished spans of a test as a tree."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


class Spans:
    """The finished spans of a test, as a tree."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self.exporter = exporter

    @property
    def all(self) -> tuple[ReadableSpan, ...]:
        return tuple(self.exporter.get_finished_spans())

    def named(self, name: str, **attributes: Any) -> list[ReadableSpan]:
        """Spans of this name whose attributes include ``attributes`` (dots as ``__``)."""
        wanted = {key.replace("__", "."): value for key, value in attributes.items()}
        return [
            span
            for span in self.all
            if span.name == name
            and all((span.attributes or {}).get(k) == v for k, v in wanted.items())
        ]

    def one(self, name: str, **attributes: Any) -> ReadableSpan:
        found = self.named(name, **attributes)
        assert len(found) == 1, (name, attributes, [s.name for s in self.all])
        return found[0]

    def parent(self, span: ReadableSpan) -> ReadableSpan | None:
        if span.parent is None:
            return None
        return next(s for s in self.all if s.context.span_id == span.parent.span_id)

    def children(self, span: ReadableSpan) -> list[ReadableSpan]:
        kids = [
            s for s in self.all if s.parent is not None and s.parent.span_id == span.context.span_id
        ]
        return sorted(kids, key=lambda s: (s.start_time or 0, s.name))

    def outline(self, span: ReadableSpan, depth: int = 0) -> list[str]:
        """``span`` and its descendants as indented names, children in start order."""
        lines = ["  " * depth + span.name]
        for child in self.children(span):
            lines += self.outline(child, depth + 1)
        return lines


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def events(span: ReadableSpan) -> list[str]:
    return [event.name for event in span.events]
