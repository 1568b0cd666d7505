"""The library's logging: silent unless the application asked, and never an exception's frames.

Every log call of the library goes through a `LazyLogger`, which decides at each call where
the line goes, in this order:

1. `configure_logging` was called (the ``actors`` command does): console or JSON lines, for
   the library's loggers only.
2. The application configured structlog (``structlog.is_configured()``): through structlog,
   with whatever processors it chose (``structlog.testing.capture_logs`` included).
3. Standard-library logging has a handler for the logger's name (``actors.*``; a handler on
   the root logger counts, as ``logging.basicConfig`` sets up): a ``logging`` record.
4. Otherwise nowhere: a library prints nothing unless the application asked. structlog is not
   even imported (it costs more than a third of ``import actors``).

An exception is never handed to a log renderer as an object (``exc_info``): renderers that
print frame locals (rich's tracebacks, which structlog's console renderer uses when rich is
installed) would print a tool's ``RunContext`` and with it the ``tool_context``, which may hold
secrets. ``exc_info=`` and ``.exception()`` become three plain fields instead: ``error_type``,
``error`` (the message, guarded against a ``__str__`` that raises) and ``exception`` (the
traceback as text: files, lines and code, no locals).
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, TextIO

from actors._safe import exception_message, format_traceback, safe_repr

__all__ = ["LazyLogger", "LogFormat", "configure_logging", "get_logger"]

LogFormat = Literal["console", "json"]
"""How `configure_logging` writes lines: ``"console"`` for people, ``"json"`` for machines."""

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
_LEVEL_NAMES = {**_LEVELS, "critical": logging.CRITICAL}


@dataclass(frozen=True)
class _Sink:
    """Where `configure_logging` sends the library's lines."""

    level: int
    tracebacks: bool
    logger: Any  # a structlog filtering bound logger over a PrintLogger


_sink: _Sink | None = None


class _Stderr:
    """Writes to whatever ``sys.stderr`` is when a line is written.

    A live terminal view may redirect stderr while it runs, so lines land above it.
    """

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


def configure_logging(
    level: int | str | None = "INFO",
    *,
    format: LogFormat = "console",
    stream: TextIO | None = None,
    tracebacks: bool = True,
) -> None:
    """Send the library's log lines to ``stream``, as console or JSON lines.

    By default the library writes nothing. Call this in an application (the ``actors``
    command does) to see what it does: each line carries what is known of where it comes
    from (``agent_id``, ``parent_id``, ``run_id``, ``session_id``, ``tool``, ``model``).
    Only the library's own loggers are configured: the application's structlog and
    standard-library logging are left as they are. Calling it again replaces the setup.

    Applications that already configure structlog or standard-library logging need not call
    it: the library's lines then go through their configuration.

    Args:
        level: The lowest level written: ``"DEBUG"``, ``"INFO"``, ``"WARNING"``, ``"ERROR"``,
            ``"CRITICAL"`` (any case) or a `logging` level number; None switches the lines
            off again.
        format: ``"console"`` (one readable line each, colored on a terminal) or ``"json"``
            (one JSON object per line, with ``timestamp``, ``level``, ``logger``, ``event``).
        stream: Where lines go; by default whatever ``sys.stderr`` is when a line is written.
        tracebacks: Add the traceback (as text, never with local variables) to lines that
            report an exception; with False they keep the exception's type and message.

    Raises:
        UserError: An unknown level or format, or a stream without ``write``.

    Example:
        >>> import io, json
        >>> import actors
        >>> from actors.testing import ScriptedModel, call
        >>> @actors.tool
        ... def flaky() -> str:
        ...     'Fail.'
        ...     raise TimeoutError("upstream timed out")
        >>> agent = actors.Agent("a", tools=[flaky], model=ScriptedModel([call("flaky"), "no"]))
        >>> out = io.StringIO()
        >>> actors.configure_logging("WARNING", format="json", stream=out)
        >>> with actors.Runtime() as runtime:
        ...     result = runtime.spawn(agent).run("go")
        >>> line = json.loads(out.getvalue())
        >>> line["event"], line["agent_id"], line["error_type"], line["error"]
        ('tool raised', 'a', 'TimeoutError', 'upstream timed out')
        >>> actors.configure_logging(None)  # back to silence
    """
    global _sink
    if level is None:
        _sink = None
        return
    _sink = _build_sink(_level_number(level), format, stream, tracebacks)


def _level_number(level: object) -> int:
    from actors.exceptions import UserError

    if isinstance(level, bool):
        raise UserError(f"a log level is a name such as 'INFO' or a number, got {level!r}")
    if isinstance(level, int):
        return level
    if isinstance(level, str) and level.lower() in _LEVEL_NAMES:
        return _LEVEL_NAMES[level.lower()]
    raise UserError(
        f"unknown log level {level!r}; use 'DEBUG', 'INFO', 'WARNING', 'ERROR' or 'CRITICAL' "
        "(or a number)"
    )


def _build_sink(level: int, format: object, stream: TextIO | None, tracebacks: bool) -> _Sink:
    from actors.exceptions import UserError

    if format not in ("console", "json"):
        raise UserError(f"unknown log format {format!r}; use 'console' or 'json'")
    if stream is not None and not callable(getattr(stream, "write", None)):
        raise UserError(f"stream must be a text stream with write(), got {type(stream).__name__}")
    import structlog  # the application asked for lines: now the import is worth it

    out: Any = stream if stream is not None else _Stderr()
    processors: list[Any] = [structlog.processors.add_log_level]
    if format == "json":
        processors += [
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _lead_with_the_essentials,
            structlog.processors.JSONRenderer(default=safe_repr),
        ]
    else:
        colors = bool(getattr(out, "isatty", lambda: False)())
        processors += [
            structlog.processors.TimeStamper(fmt="%Y-%m-%d %H:%M:%S", utc=False),
            # Tracebacks reach the renderer as text only; never let it print locals anyway.
            structlog.dev.ConsoleRenderer(
                colors=colors, exception_formatter=structlog.dev.plain_traceback
            ),
        ]
    logger = structlog.wrap_logger(
        structlog.PrintLogger(out),
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(level),
        context_class=dict,
        cache_logger_on_first_use=False,
    )
    return _Sink(level, bool(tracebacks), logger)


def _lead_with_the_essentials(
    _logger: Any, _method: str, event_dict: dict[str, Any]
) -> dict[str, Any]:
    """Put when, how bad, where and what first in a JSON line; the context after."""
    lead = {key: event_dict.pop(key) for key in _LEAD if key in event_dict}
    return {**lead, **event_dict}


_LEAD = ("timestamp", "level", "logger", "event")


def current_sink() -> _Sink | None:
    """The setup of the last `configure_logging` call, or None (for a caller to restore it)."""
    return _sink


def restore_sink(sink: _Sink | None) -> None:
    """Put back a setup `current_sink` returned."""
    global _sink
    _sink = sink


ExcInfo = bool | BaseException | tuple[type[BaseException], BaseException, TracebackType] | None


class LazyLogger:
    """The library's logger: a name and bound context, resolved at each call (see the module).

    Its methods never raise: a line that cannot be written must not fail what it reports.
    """

    __slots__ = ("_context", "_name")

    def __init__(self, name: str, context: dict[str, Any] | None = None) -> None:
        self._name = name
        self._context = context or {}

    def bind(self, **context: Any) -> LazyLogger:
        """A logger with more context bound."""
        return LazyLogger(self._name, {**self._context, **context})

    def debug(self, event: str, **kw: Any) -> None:
        """Log at debug level."""
        self._log("debug", event, kw)

    def info(self, event: str, **kw: Any) -> None:
        """Log at info level."""
        self._log("info", event, kw)

    def warning(self, event: str, **kw: Any) -> None:
        """Log at warning level."""
        self._log("warning", event, kw)

    def error(self, event: str, **kw: Any) -> None:
        """Log at error level."""
        self._log("error", event, kw)

    def exception(self, event: str, **kw: Any) -> None:
        """Log at error level with the exception being handled (as text, never its frames)."""
        kw.setdefault("exc_info", True)
        self._log("error", event, kw)

    def _log(self, method: str, event: str, kw: dict[str, Any]) -> None:
        try:
            self._emit(method, event, kw)
        except Exception:  # a log line must never fail the operation it reports
            return

    def _emit(self, method: str, event: str, kw: dict[str, Any]) -> None:
        level = _LEVELS[method]
        exc_info: ExcInfo = kw.pop("exc_info", None)
        sink = _sink
        if sink is not None:
            if level < sink.level:
                return
            fields = {"logger": self._name, **self._context, **kw}
            _add_exception(fields, exc_info, tracebacks=sink.tracebacks)
            getattr(sink.logger, method)(event, **fields)
            return
        structlog = sys.modules.get("structlog")  # never configured if never imported
        if structlog is not None and structlog.is_configured():
            fields = {**self._context, **kw}
            _add_exception(fields, exc_info, tracebacks=True)
            logger = structlog.get_logger(self._name)
            getattr(logger, method)(event, **fields)
            return
        std = logging.getLogger(self._name)
        if std.isEnabledFor(level) and std.hasHandlers():
            fields = {**self._context, **kw}
            _add_exception(fields, exc_info, tracebacks=True)
            std.log(level, _line(event, fields), extra={"actors": {"event": event, **fields}})


def _add_exception(fields: dict[str, Any], exc_info: ExcInfo, *, tracebacks: bool) -> None:
    """Turn ``exc_info`` into plain fields (type, safe message, traceback text) in ``fields``."""
    if exc_info is None or exc_info is False:
        return
    if isinstance(exc_info, BaseException):
        exc: BaseException | None = exc_info
    elif isinstance(exc_info, tuple):
        exc = exc_info[1]
    else:
        exc = sys.exc_info()[1]
    if exc is None:
        return
    fields.setdefault("error_type", type(exc).__name__)
    fields.setdefault("error", exception_message(exc))
    if tracebacks:
        fields.setdefault("exception", format_traceback(exc))


def _line(event: str, fields: dict[str, Any]) -> str:
    """A standard-library log message: the event, ``key=value`` pairs, then any traceback."""
    parts = [event]
    for key, value in fields.items():
        if key == "exception":
            continue
        text = value if isinstance(value, str) and value and " " not in value else None
        parts.append(f"{key}={text if text is not None else safe_repr(value)}")
    line = " ".join(parts)
    if "exception" in fields:
        line += "\n" + str(fields["exception"])
    return line


def get_logger(name: str) -> LazyLogger:
    """The library's logger called ``name``."""
    return LazyLogger(name)
