"""A run's caller hears how the run ended, whatever order its host's answers come in. No Ray."""

from __future__ import annotations

import concurrent.futures
from typing import Any

import pytest

from actors.exceptions import AgentStoppedError
from actors.ray._entries import RunEntry
from actors.ray._wire import Taken


def run_entry() -> tuple[RunEntry, concurrent.futures.Future[Any]]:
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    client: Any = None  # never reached: the outbox's end is handed to the entry by the test
    return RunEntry(client, "a", 0, None, "run", "go", future, None), future


@pytest.mark.parametrize("taken_first", [True, False])
def test_a_run_whose_host_closed_its_outbox_shutting_down_ends_stopped(taken_first: bool) -> None:
    entry, future = run_entry()
    if taken_first:
        entry.replied(Taken())
        entry._closed(None)  # the host shut down before the run ended
    else:
        entry._closed(None)  # the outbox's end came before the lane's answer
        assert not future.done()
        entry.replied(Taken())
    error = future.exception(timeout=5)
    assert isinstance(error, AgentStoppedError)
    assert "'a'" in str(error)
