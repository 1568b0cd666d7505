"""The log records of the libraries we drive (psycopg_pool, the MCP SDK): quiet like ours.

Python prints a WARNING of a logger with no handler anywhere on its way to the root through
its last-resort handler, so with nothing configured psycopg_pool writes "discarding closed
connection" to stderr, and the MCP SDK a traceback for a line it cannot parse. The library
prints nothing unless the application asks: when one of our components starts using such a
library, `quiet_dependency_logs` puts a handler on its logger that takes only the records that
would have gone to the last resort:

- the application configured standard-library logging (a handler on the record's way, the
  root's included): the handler does nothing, and the record reaches the application's
  handlers as before;
- `actors.configure_logging` was called (the ``actors`` command does): the record is written
  there, like the library's own lines;
- otherwise: nowhere.
"""

from __future__ import annotations

import logging
import threading

from actors._logging import current_sink
from actors._safe import exception_message, format_traceback

__all__ = ["quiet_dependency_logs"]

_lock = threading.Lock()


class _LastResort(logging.Handler):
    """Routes a record that no other handler would take (see the module)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sink = current_sink()
            if sink is None or record.levelno < sink.level or _handled_elsewhere(record):
                return
            try:
                event = record.getMessage()
            except Exception:  # a bad format string in a dependency's call
                event = str(record.msg)
            fields: dict[str, object] = {"logger": record.name}
            exc = record.exc_info[1] if record.exc_info else None
            if exc is not None:
                fields["error_type"] = type(exc).__name__
                fields["error"] = exception_message(exc)
                if sink.tracebacks:
                    fields["exception"] = format_traceback(exc)
            getattr(sink.logger, _method(record.levelno))(event, **fields)
        except Exception:  # a log line must never fail what it reports
            return


def _method(level: int) -> str:
    if level >= logging.ERROR:
        return "error"
    if level >= logging.WARNING:
        return "warning"
    return "info" if level >= logging.INFO else "debug"


def _handled_elsewhere(record: logging.LogRecord) -> bool:
    """Whether a handler other than ours is on the record's way up (as `callHandlers` walks)."""
    logger: logging.Logger | None = logging.getLogger(record.name)
    while logger is not None:
        if any(not isinstance(handler, _LastResort) for handler in logger.handlers):
            return True
        logger = logger.parent if logger.propagate else None
    return False


def quiet_dependency_logs(*names: str) -> None:
    """Route the records of the loggers ``names`` like the library's own (see the module).

    Idempotent; called by the components that use those libraries, never on import.
    """
    with _lock:
        for name in names:
            logger = logging.getLogger(name)
            if not any(isinstance(handler, _LastResort) for handler in logger.handlers):
                logger.addHandler(_LastResort())
