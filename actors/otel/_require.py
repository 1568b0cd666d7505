"""The one check that the OpenTelemetry API is installed, with an error that names the extra."""

from __future__ import annotations

import importlib

__all__ = ["require_opentelemetry"]

EXTRA_HINT = "pip install 'actors[otel]'"


def require_opentelemetry() -> None:
    """Raise `ImportError` naming the ``actors[otel]`` extra if ``opentelemetry-api`` is missing."""
    try:
        importlib.import_module("opentelemetry.trace")
    except ImportError as exc:
        raise ImportError(
            "actors.otel needs the OpenTelemetry API (the 'opentelemetry-api' package); "
            f"install it with: {EXTRA_HINT}",
            name="opentelemetry",
        ) from exc
