from __future__ import annotations

import threading

import pytest

from actors import CancellationToken
from actors.exceptions import Cancelled


def test_a_new_token_is_not_cancelled() -> None:
    token = CancellationToken()
    assert not token.cancelled
    assert token.reason is None
    token.raise_if_cancelled()
    assert token.wait(timeout=0) is False
    assert "active" in repr(token)


def test_cancel_sets_the_flag_once() -> None:
    token = CancellationToken()
    token.cancel("timeout")
    token.cancel("second reason is ignored")
    assert token.cancelled
    assert token.reason == "timeout"
    assert token.wait(timeout=0) is True
    assert "timeout" in repr(token)
    with pytest.raises(Cancelled, match="timeout"):
        token.raise_if_cancelled()


def test_callbacks_run_once_with_the_reason() -> None:
    token = CancellationToken()
    seen: list[str] = []
    token.on_cancel(seen.append)
    token.cancel("stop")
    token.cancel("again")
    assert seen == ["stop"]


def test_a_callback_registered_after_cancel_runs_at_once() -> None:
    token = CancellationToken()
    token.cancel("late")
    seen: list[str] = []
    unregister = token.on_cancel(seen.append)
    assert seen == ["late"]
    unregister()  # harmless


def test_unregister() -> None:
    token = CancellationToken()
    seen: list[str] = []
    unregister = token.on_cancel(seen.append)
    unregister()
    unregister()
    token.cancel()
    assert seen == []


def test_a_failing_callback_does_not_stop_the_others() -> None:
    token = CancellationToken()
    seen: list[str] = []

    def broken(reason: str) -> None:
        raise RuntimeError("cleanup failed")

    token.on_cancel(broken)
    token.on_cancel(seen.append)
    with pytest.raises(RuntimeError, match="cleanup failed"):
        token.cancel("stop")
    assert seen == ["stop"]
    assert token.cancelled


def test_several_failing_callbacks_are_all_reported() -> None:
    token = CancellationToken()

    def broken(reason: str) -> None:
        raise RuntimeError(reason)

    token.on_cancel(broken)
    token.on_cancel(broken)
    with pytest.raises(ExceptionGroup) as info:
        token.cancel("x")
    assert len(info.value.exceptions) == 2


def test_wait_wakes_up_when_another_thread_cancels() -> None:
    token = CancellationToken()
    waiting = threading.Event()
    woke: list[bool] = []

    def waiter() -> None:
        waiting.set()
        woke.append(token.wait(timeout=10))

    thread = threading.Thread(target=waiter)
    thread.start()
    assert waiting.wait(timeout=10)
    token.cancel()
    thread.join(timeout=10)
    assert woke == [True]


def test_concurrent_cancels_run_each_callback_once() -> None:
    token = CancellationToken()
    seen: list[str] = []
    token.on_cancel(seen.append)
    barrier = threading.Barrier(8)

    def cancel(n: int) -> None:
        barrier.wait(timeout=10)
        token.cancel(f"thread {n}")

    threads = [threading.Thread(target=cancel, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert len(seen) == 1
    assert seen == [token.reason]
