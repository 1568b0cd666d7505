"""Fixtures of the subagent tests: a runtime, and a hook that tells when a child answered."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest

from actors import Runtime
from actors.testing import FakeClock


@pytest.fixture
def rt() -> Iterator[Runtime]:
    with Runtime(clock=FakeClock()) as runtime:
        yield runtime


class Answered:
    """Sets an event once a child has handed its result to its parent's mailbox.

    The runtime's ``child_done`` runs right after a child tells its parent: waiting on this
    event orders children's completions without sleeping.
    """

    def __init__(self, runtime: Runtime) -> None:
        self._events: defaultdict[str, threading.Event] = defaultdict(threading.Event)
        self._lock = threading.Lock()
        original = runtime._host.child_done

        def child_done(child: Any, effect: Any) -> None:
            original(child, effect)
            self.of(child.agent_id).set()

        runtime._host.child_done = child_done  # type: ignore[method-assign]

    def of(self, agent_id: str) -> threading.Event:
        with self._lock:
            return self._events[agent_id]


@pytest.fixture
def answered(rt: Runtime) -> Answered:
    return Answered(rt)
