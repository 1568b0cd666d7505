"""Seconds as users pass them in many places: a clear `UserError` at the call, never later.

A timeout of ``"30"`` compared with a number deep in a thread otherwise fails far from the call
that was wrong, with a message that does not say what to change.
"""

from __future__ import annotations

import math

from actors.exceptions import UserError

__all__ = ["check_timeout"]


def check_timeout(value: object, what: str, error: type[UserError] = UserError) -> float | None:
    """``value`` as seconds (a finite number > 0), or None; else ``error`` naming ``what``."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise error(f"{what} must be a positive number of seconds or None, got {value!r}")
    return float(value)
