"""Loggers that import structlog only when something is logged.

``import structlog`` costs more than a third of ``import actors`` (it imports its console
renderer, and through it rich), while most processes never log a line from this library. A
`LazyLogger` resolves ``structlog.get_logger(name).bind(**context)`` at each call, so it also
follows whatever configuration is active then (``structlog.testing.capture_logs`` included).
"""

from __future__ import annotations

from typing import Any

__all__ = ["LazyLogger", "get_logger"]


class LazyLogger:
    """A structlog logger by name and bound context, resolved at each call."""

    __slots__ = ("_context", "_name")

    def __init__(self, name: str, context: dict[str, Any] | None = None) -> None:
        self._name = name
        self._context = context or {}

    def bind(self, **context: Any) -> LazyLogger:
        """A logger with more context bound."""
        return LazyLogger(self._name, {**self._context, **context})

    def _resolve(self) -> Any:
        import structlog

        logger = structlog.get_logger(self._name)
        return logger.bind(**self._context) if self._context else logger

    def debug(self, event: str, **kw: Any) -> None:
        """Log at debug level."""
        self._resolve().debug(event, **kw)

    def info(self, event: str, **kw: Any) -> None:
        """Log at info level."""
        self._resolve().info(event, **kw)

    def warning(self, event: str, **kw: Any) -> None:
        """Log at warning level."""
        self._resolve().warning(event, **kw)

    def error(self, event: str, **kw: Any) -> None:
        """Log at error level."""
        self._resolve().error(event, **kw)

    def exception(self, event: str, **kw: Any) -> None:
        """Log at error level with the exception being handled."""
        self._resolve().exception(event, **kw)


def get_logger(name: str) -> LazyLogger:
    """The library's logger called ``name``."""
    return LazyLogger(name)
