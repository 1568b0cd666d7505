"""A lane keeps one caller's order to one host, whatever order the transport runs calls in.

The host here is a fake whose calls the test answers, in the order it likes (Ray runs the calls
of an async actor in no set order). No Ray needed.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any

import pytest

from actors.ray._lane import MAX_BATCH, Lane

TAKEN = "taken"


class HostDied(Exception):
    """What a call to a host that died fails with."""


class FakeHost:
    """Records each call; applies its inputs only when the test answers it."""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple[Any, ...], concurrent.futures.Future[Any]]] = []
        self.applied: list[Any] = []

    def call(self, inputs: tuple[Any, ...]) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.calls.append((inputs, future))
        return future

    def pending(self) -> list[int]:
        return [i for i, (_, future) in enumerate(self.calls) if not future.done()]

    def answer(self, index: int, replies: list[Any] | None = None) -> None:
        inputs, future = self.calls[index]
        self.applied.extend(inputs)
        future.set_result(replies if replies is not None else [TAKEN] * len(inputs))

    def fail(self, index: int, error: BaseException) -> None:
        self.calls[index][1].set_exception(error)

    def inputs(self, index: int) -> tuple[Any, ...]:
        return self.calls[index][0]


class Note:
    """An entry: a name that travels, and what the lane told it."""

    def __init__(self, name: str, again: Callable[[Any], bool] = lambda reply: False) -> None:
        self.message = name
        self.sends = 0
        self.replies: list[Any] = []
        self.losses: list[BaseException] = []
        self._again = again

    def sent(self) -> None:
        self.sends += 1

    def replied(self, reply: Any) -> bool:
        self.replies.append(reply)
        return self._again(reply)

    def lost(self, error: BaseException) -> bool:
        self.losses.append(error)
        return False


class Inline(concurrent.futures.Executor):
    """Runs what is submitted at once, on the caller's thread."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        future.set_result(fn(*args, **kwargs))
        return future


def lane_of(host: FakeHost, **options: Any) -> Lane:
    return Lane(host.call, gone=lambda error: isinstance(error, HostDied), **options)


def test_the_host_applies_inputs_in_the_order_they_were_put_whatever_order_calls_run_in() -> None:
    host = FakeHost()
    lane = lane_of(host)
    lane.put(Note("run"))
    lane.put(Note("steer"))
    lane.put(Note("cancel"))
    # Run whatever is pending, the latest call first, as an async actor may.
    while host.pending():
        host.answer(host.pending()[-1])
    assert host.applied == ["run", "steer", "cancel"]
    # One call at a time: what was put while the first was out went in the next, together.
    assert [host.inputs(i) for i in range(len(host.calls))] == [("run",), ("steer", "cancel")]


def test_each_entry_hears_its_own_answer_and_a_full_lane_goes_in_batches() -> None:
    host = FakeHost()
    lane = lane_of(host)
    notes = [Note(f"m{i}") for i in range(MAX_BATCH + 3)]
    for note in notes:
        lane.put(note)
    host.answer(0)
    assert len(host.inputs(1)) == MAX_BATCH
    host.answer(1, [f"reply {i}" for i in range(MAX_BATCH)])
    host.answer(2)
    assert host.applied == [note.message for note in notes]
    assert notes[1].replies == ["reply 0"]
    assert notes[MAX_BATCH].replies == [f"reply {MAX_BATCH - 1}"]
    assert all(note.sends == 1 for note in notes)


def test_an_entry_that_goes_again_goes_before_what_was_put_after_it() -> None:
    host = FakeHost()
    retried: list[list[str]] = []

    def retry(entries: list[Note]) -> list[Note]:
        retried.append([entry.message for entry in entries])  # e.g. activate the agent here
        return [Note(f"{entry.message} again") for entry in entries]

    lane = lane_of(host, retry=retry, pool=Inline())
    lane.put(Note("run", again=lambda reply: reply == "missing"))
    lane.put(Note("steer"))  # put while the run's call is out
    host.answer(0, ["missing"])
    assert retried == [["run"]]
    assert host.inputs(1) == ("run again", "steer")


def test_a_call_that_failed_with_its_host_tells_its_entries_and_the_lane_goes_on() -> None:
    host = FakeHost()
    lane = lane_of(host)
    run, steer = Note("run"), Note("steer")
    lane.put(run)
    lane.put(steer)
    died = HostDied("gone")
    host.fail(0, died)
    assert run.losses == [died]  # it may or may not have been applied: the entry decides
    assert host.inputs(1) == ("steer",)
    host.answer(1)
    assert steer.replies == [TAKEN]


def test_a_batch_sent_after_the_host_was_seen_failing_goes_again_first() -> None:
    host = FakeHost()
    lane = lane_of(host, resend_delay=0)
    lane.put(Note("first"))
    host.fail(0, HostDied("gone"))  # the lane sees its host fail
    second, third = Note("second"), Note("third")
    lane.put(second)
    lane.put(third)  # waits behind the second's call
    host.fail(1, HostDied("not restarted yet"))  # sent to the dead process: it never ran there
    assert second.losses == []
    assert host.inputs(2) == ("second", "third")  # again, before the third
    host.answer(2)
    assert host.applied == ["second", "third"]
    assert second.sends == 2
    assert second.replies == [TAKEN]


def test_a_host_that_does_not_come_back_in_time_loses_the_batch() -> None:
    host = FakeHost()
    lane = lane_of(host, restart_wait=0.0, resend_delay=0)
    lane.put(Note("first"))
    host.fail(0, HostDied("gone"))
    second = Note("second")
    lane.put(second)
    host.fail(1, HostDied("still gone"))
    assert len(second.losses) == 1
    assert len(host.calls) == 2


def test_a_pull_that_failed_makes_the_next_batch_go_again_if_it_fails_too() -> None:
    host = FakeHost()
    lane = lane_of(host, resend_delay=0)
    lane.host_failed()  # e.g. a run's pull failed: the host died
    note = Note("run")
    lane.put(note)
    host.fail(0, HostDied("restarting"))
    assert note.losses == []
    host.answer(1)
    assert note.replies == [TAKEN]


def test_drained_is_set_once_everything_put_before_it_was_answered() -> None:
    host = FakeHost()
    lane = lane_of(host)
    assert lane.drained().done()  # nothing in flight
    lane.put(Note("cancel"))
    drained = lane.drained()
    lane.put(Note("later"))
    assert not drained.done()
    host.answer(0)
    assert drained.done()
    assert host.inputs(1) == ("later",)


def test_an_entry_that_fails_on_its_answer_does_not_stop_the_lane() -> None:
    host = FakeHost()
    lane = lane_of(host)

    def broken(reply: Any) -> bool:
        raise RuntimeError("a bug in an entry")

    lane.put(Note("broken", again=broken))
    lane.put(Note("next"))
    host.answer(0)
    host.answer(1)
    assert host.applied == ["broken", "next"]


def test_a_batch_that_cannot_be_sent_loses_its_entries_and_the_lane_goes_on() -> None:
    host = FakeHost()
    refused = ValueError("does not pickle")
    calls = 0

    def call(inputs: tuple[Any, ...]) -> concurrent.futures.Future[Any]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise refused
        return host.call(inputs)

    lane = Lane(call, gone=lambda error: False)
    first = Note("first")
    lane.put(first)
    assert first.losses == [refused]
    lane.put(Note("second"))
    host.answer(0)
    assert host.applied == ["second"]


def test_entries_that_cannot_go_again_hear_why_and_the_lane_goes_on() -> None:
    host = FakeHost()
    broken = RuntimeError("cannot activate")

    def retry(entries: list[Note]) -> list[Note]:
        raise broken

    lane = lane_of(host, retry=retry, pool=Inline())
    refused = Note("run", again=lambda reply: True)
    lane.put(refused)
    lane.put(Note("next"))
    host.answer(0, ["missing"])
    assert refused.losses == [broken]  # its caller is not left waiting
    assert host.inputs(1) == ("next",)


def test_a_reply_that_does_not_match_the_batch_loses_it_and_the_lane_goes_on() -> None:
    host = FakeHost()
    lane = lane_of(host)
    first = Note("first")
    lane.put(first)
    lane.put(Note("second"))
    host.answer(0, [])
    assert len(first.losses) == 1
    assert host.inputs(1) == ("second",)


def test_a_lane_that_retries_needs_a_pool() -> None:
    with pytest.raises(ValueError, match="pool"):
        Lane(FakeHost().call, retry=lambda entries: entries)


def test_an_entry_due_again_after_its_caller_closed_hears_that_it_stopped() -> None:
    from actors.exceptions import AgentStoppedError

    host = FakeHost()
    pool = concurrent.futures.ThreadPoolExecutor(1)
    lane = lane_of(host, retry=lambda entries: entries, pool=pool)
    run = Note("run", again=lambda reply: reply == "missing")
    lane.put(run)
    pool.shutdown(wait=True)  # the runtime closed its client while the call was out
    host.answer(0, ["missing"])  # the host lost the agent: the entry would go again
    assert len(run.losses) == 1
    assert isinstance(run.losses[0], AgentStoppedError)
    lane.put(Note("after"))  # the lane is not left busy: what comes next is sent
    assert host.inputs(1) == ("after",)
