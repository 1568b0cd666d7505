"""RetryPolicy and the retry loop, on a fake clock: no real waiting."""

from __future__ import annotations

import asyncio
import email.utils

import pytest

from actors.exceptions import ModelHTTPError, ModelTimeoutError, UserError
from actors.models import RetryPolicy
from actors.models._retry import RetryableError, parse_retry_after, send_with_retries


class FakeTime:
    """A clock that only moves when the retry loop sleeps; records every sleep."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def failing(*failures: Exception, result: str = "ok") -> tuple[list[int], object]:
    calls: list[int] = []
    pending = list(failures)

    async def attempt() -> str:
        calls.append(1)
        if pending:
            raise pending.pop(0)
        return result

    return calls, attempt


def rate_limited(retry_after: float | None = None) -> RetryableError:
    return RetryableError(ModelHTTPError("429", status_code=429), retry_after)


def run(attempt: object, policy: RetryPolicy, time: FakeTime) -> str:
    return asyncio.run(
        send_with_retries(
            attempt,  # type: ignore[arg-type]
            policy,
            sleep=time.sleep,
            clock=time.clock,
        )
    )


def test_backoff_doubles_up_to_the_cap() -> None:
    policy = RetryPolicy(initial=0.5, max_delay=3, jitter=0)
    assert [policy.delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_jitter_stays_within_its_fraction() -> None:
    policy = RetryPolicy(initial=1.0, max_delay=10, jitter=0.5)
    delays = {policy.delay(2) for _ in range(200)}
    assert all(1.0 <= delay <= 2.0 for delay in delays)
    assert len(delays) > 1


def test_server_requested_wait_replaces_backoff() -> None:
    assert RetryPolicy(initial=30).delay(1, retry_after=0.25) == 0.25


@pytest.mark.parametrize(
    "kwargs",
    [{"max_attempts": 0}, {"initial": -1}, {"total": float("inf")}, {"jitter": 1.5}],
)
def test_policy_rejects_nonsense(kwargs: dict[str, float]) -> None:
    with pytest.raises(UserError):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


def test_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after": "1.5"}) == 1.5
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "-4"}) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None
    date = email.utils.formatdate(1_000_030.0, usegmt=True)
    assert parse_retry_after({"retry-after": date}, now=1_000_000.0) == 30.0
    assert parse_retry_after({"retry-after": date}, now=2_000_000.0) == 0.0


def test_retries_until_success_with_growing_waits() -> None:
    time = FakeTime()
    calls, attempt = failing(rate_limited(), rate_limited())
    assert run(attempt, RetryPolicy(initial=1, jitter=0), time) == "ok"
    assert len(calls) == 3
    assert time.sleeps == [1.0, 2.0]


def test_gives_up_after_max_attempts_with_the_last_error() -> None:
    time = FakeTime()
    timeout = RetryableError(ModelTimeoutError("slow"))
    calls, attempt = failing(rate_limited(), rate_limited(), timeout, rate_limited())
    with pytest.raises(ModelTimeoutError, match="slow"):
        run(attempt, RetryPolicy(max_attempts=3, initial=1, jitter=0), time)
    assert len(calls) == 3
    assert len(time.sleeps) == 2


def test_honours_retry_after_over_backoff() -> None:
    time = FakeTime()
    calls, attempt = failing(rate_limited(retry_after=7))
    run(attempt, RetryPolicy(initial=0.1, jitter=0), time)
    assert time.sleeps == [7]
    assert len(calls) == 2


def test_no_retry_starts_past_the_total_budget() -> None:
    time = FakeTime()
    calls, attempt = failing(*[rate_limited() for _ in range(10)])
    with pytest.raises(ModelHTTPError):
        run(
            attempt,
            RetryPolicy(max_attempts=10, initial=4, max_delay=100, total=10, jitter=0),
            time,
        )
    # Waits 4 (at 4 s), then 8 would end at 12 > 10: stop after two attempts.
    assert time.sleeps == [4]
    assert len(calls) == 2


def test_retry_after_beyond_the_budget_fails_at_once() -> None:
    time = FakeTime()
    calls, attempt = failing(rate_limited(retry_after=3600))
    with pytest.raises(ModelHTTPError) as caught:
        run(attempt, RetryPolicy(total=60), time)
    assert caught.value.status_code == 429
    assert time.sleeps == []
    assert len(calls) == 1


def test_final_errors_are_not_retried() -> None:
    time = FakeTime()
    calls, attempt = failing(ModelHTTPError("bad request", status_code=400))
    with pytest.raises(ModelHTTPError):
        run(attempt, RetryPolicy(), time)
    assert len(calls) == 1


def test_one_attempt_means_no_retries() -> None:
    time = FakeTime()
    calls, attempt = failing(rate_limited())
    with pytest.raises(ModelHTTPError):
        run(attempt, RetryPolicy(max_attempts=1), time)
    assert len(calls) == 1
