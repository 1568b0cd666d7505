"""When and how long to wait before sending a failed model request again."""

from __future__ import annotations

import asyncio
import email.utils
import math
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from actors._logging import get_logger
from actors.exceptions import ModelError, UserError

__all__ = ["RetryPolicy", "RetryableError", "parse_retry_after", "send_with_retries"]

_log = get_logger("actors.models")

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a model retries a request that failed for a reason that may pass.

    Retried: HTTP 408, 409, 429 and 5xx replies, connection errors and read timeouts that
    happen before any part of the reply reached ``on_delta``. Never retried: 401 and 403
    (the key is wrong, waiting will not fix it), other 4xx replies, and replies that arrived
    but could not be understood.

    The wait before retry ``n`` (1-based) is ``min(max_delay, initial * 2 ** (n - 1))``,
    of which the last ``jitter`` fraction is random, so that many clients that failed
    together do not retry together. A ``Retry-After`` (or ``retry-after-ms``) header from
    the server replaces that wait, however long it is, as long as it fits in ``total``.

    Attributes:
        max_attempts: Attempts in all, the first one included (1 turns retries off).
        initial: The wait before the first retry, in seconds.
        max_delay: The longest computed wait, in seconds.
        total: No retry starts when it would begin later than this many seconds after the
            first attempt started. It does not cut short an attempt that is under way (a
            long reply may take longer than ``total``; the transport timeouts bound those).
        jitter: The random fraction of each computed wait, from 0 (none) to 1 (all of it).

    Example:
        >>> RetryPolicy(max_attempts=4, initial=0.5, max_delay=20, total=60, jitter=0).delay(3)
        2.0
    """

    max_attempts: int = 4
    initial: float = 0.5
    max_delay: float = 20.0
    total: float = 60.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise UserError(f"max_attempts must be at least 1, got {self.max_attempts}")
        for name in ("initial", "max_delay", "total"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise UserError(f"{name} must be a finite number >= 0, got {value!r}")
        if not 0 <= self.jitter <= 1:
            raise UserError(f"jitter must be between 0 and 1, got {self.jitter!r}")

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """The wait in seconds before retry number ``retry`` (1 for the first retry).

        Args:
            retry: Which retry this is, starting at 1.
            retry_after: What the server asked for (``Retry-After``), if anything.
        """
        if retry_after is not None:
            return max(0.0, retry_after)
        base = min(self.max_delay, self.initial * 2.0 ** (retry - 1))
        return base * (1.0 - self.jitter) + random.uniform(0.0, base * self.jitter)


class RetryableError(Exception):
    """An attempt failed in a way that another attempt may not.

    Attributes:
        error: What to raise if no retry follows.
        retry_after: The wait the server asked for, in seconds, if it did.
    """

    def __init__(self, error: ModelError, retry_after: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Read the server's requested wait from ``retry-after-ms`` or ``Retry-After``.

    ``Retry-After`` may be a number of seconds or an HTTP date. Returns None when neither
    header is present or readable.
    """
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            value = float(milliseconds)
        except ValueError:
            value = math.nan
        if math.isfinite(value):
            return max(0.0, value / 1000.0)
    header = headers.get("retry-after")
    if header is None:
        return None
    try:
        seconds = float(header)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(header)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        current = datetime.now(UTC).timestamp() if now is None else now
        return max(0.0, when.timestamp() - current)
    return max(0.0, seconds) if math.isfinite(seconds) else None


async def send_with_retries(
    attempt: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    log: Any = _log,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """Run ``attempt`` until it returns, fails for good, or the policy's budget runs out.

    ``attempt`` raises `RetryableError` for a failure worth another try, and a `ModelError`
    for one that is not. When no retry follows, the `RetryableError`'s ``error`` is raised.
    ``log`` is a structlog logger, bound to the model and the agent.
    """
    started = clock()
    number = 1
    while True:
        try:
            return await attempt()
        except RetryableError as failure:
            wait = policy.delay(number, failure.retry_after)
            elapsed = clock() - started
            if number >= policy.max_attempts or elapsed + wait > policy.total:
                log.warning(
                    "model.request_failed",
                    attempts=number,
                    error=type(failure.error).__name__,
                    reason=str(failure.error),
                )
                raise failure.error from failure.__cause__
            log.info(
                "model.retry",
                attempt=number,
                delay=round(wait, 3),
                reason=str(failure.error),
            )
            await sleep(wait)
            number += 1
