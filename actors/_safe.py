"""Text of things the library does not control: a user's exceptions and values.

A user's exception may have a ``__str__`` that raises (or returns something that is not a
string). Called outside a guard, that second exception escapes from wherever the library was
reporting the first one — a tool's thread, an effect's task — and the run it belonged to never
hears back. Every ``str(exc)`` or ``repr(exc)`` of an exception the library did not raise itself
goes through this module instead.

A traceback is text made here too, never an exception object handed to a log renderer: some
renderers (rich's, which structlog's console renderer uses) print every frame's local
variables, and a tool's frames hold its ``RunContext`` with the ``tool_context`` in it.
"""

from __future__ import annotations

from actors._text import clean_text

__all__ = ["exception_message", "exception_text", "format_traceback", "safe_repr"]


def exception_message(exc: BaseException) -> str:
    """``str(exc)``, or a placeholder naming what went wrong when that raises.

    The text follows the text rule (`clean_text`): the message is logged, shown to a model and
    printed, and a lone surrogate in it would break each of those.
    """
    try:
        text = str(exc)
    except Exception as error:  # whatever a user's __str__ does, reporting must go on
        return f"<str() raised {type(error).__name__}>"
    return text if text.isascii() else clean_text(text)


def exception_text(exc: BaseException) -> str:
    """``"TypeName: message"`` (or the type name alone when the message is empty); never raises.

    Example:
        >>> class Odd(Exception):
        ...     def __str__(self) -> str:
        ...         raise RuntimeError("no")
        >>> exception_text(Odd())
        'Odd: <str() raised RuntimeError>'
    """
    name = type(exc).__name__
    message = exception_message(exc)
    return f"{name}: {message}" if message else name


def safe_repr(value: object) -> str:
    """``repr(value)``, or ``<TypeName: repr() raised ...>`` when that raises."""
    try:
        return repr(value)
    except Exception as error:  # a user's __repr__ must not break the report it is part of
        return f"<{type(value).__name__}: repr() raised {type(error).__name__}>"


def format_traceback(exc: BaseException) -> str:
    """The traceback of ``exc`` (with its causes) as text: file, line and code, never locals."""
    import traceback  # only when something fails

    try:
        lines = traceback.TracebackException.from_exception(exc, capture_locals=False).format()
        return "".join(lines).rstrip("\n")
    except Exception:  # a traceback that cannot be formatted still leaves its type and message
        return exception_text(exc)
