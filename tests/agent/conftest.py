"""Fixtures of the agent-loop tests: a runtime that stops every actor it started."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest

from actors import Runtime
from actors.loop._types import CallTool, Input, ToolFinished
from actors.testing import FakeClock


@pytest.fixture
def rt() -> Iterator[Runtime]:
    with Runtime(clock=FakeClock()) as runtime:
        yield runtime


class Deliveries:
    """Sets an event once a tool call's result has been handed to its agent's mailbox.

    Mailboxes are first in, first out: a tool that waits for another call's event finishes
    after it, which is how tests make tools finish in a chosen order without sleeping.
    """

    def __init__(self, runtime: Runtime) -> None:
        self._events: defaultdict[str, threading.Event] = defaultdict(threading.Event)
        self._lock = threading.Lock()
        effects = runtime._host.effects
        original = effects.call_tool

        def call_tool(effect: CallTool, deliver: Any, delegator: Any) -> None:
            def delivered(message: Input) -> None:
                deliver(message)
                if isinstance(message, ToolFinished):
                    self.of(message.call_id).set()

            original(effect, delivered, delegator)

        effects.call_tool = call_tool  # type: ignore[method-assign]

    def of(self, call_id: str) -> threading.Event:
        with self._lock:
            return self._events[call_id]


@pytest.fixture
def deliveries(rt: Runtime) -> Deliveries:
    return Deliveries(rt)
