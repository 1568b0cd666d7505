"""In-process approval: a handler the host asks instead of surfacing an approval request."""

from __future__ import annotations

from collections.abc import Callable

from actors._logging import get_logger
from actors._safe import exception_text
from actors.context._suspension import Answer, Request

__all__ = ["ApprovalHandler", "decide_approval"]

_log = get_logger("actors.runtime")

ApprovalHandler = Callable[[Request], "Answer | bool"]
"""An in-process approval handler: the request (tool name and arguments in ``data``) in,
an `Answer` (or a bool) out. It runs on a tool thread, so it may block (e.g. on a prompt)."""


def decide_approval(handler: ApprovalHandler, request: Request) -> Answer:
    """Ask ``handler``; a bool becomes an `Answer`, and anything else (or an error) denies."""
    try:
        decision: object = handler(request)
    except Exception as exc:  # a failing handler denies: deny-by-default
        _log.warning("approval handler raised", exc_info=exc)
        return Answer(ok=False, reason=f"the approval handler failed: {exception_text(exc)}")
    if isinstance(decision, bool):
        return Answer(ok=decision)
    if isinstance(decision, Answer):
        return decision
    return Answer(
        ok=False,
        reason=f"the approval handler returned {type(decision).__name__}, not an Answer or a bool",
    )
