"""A parent's messages to its child on another host go through one lane, in the order sent.

The parent's host runs here in-process, with a fake transport to the other host whose calls
the test answers when it likes: a cancel sent right after the child's run waits until the
child's host has taken the run, then follows it.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from actors import Agent, Subagent
from actors.loop._types import CancelRun
from actors.ray._inbox import deliver
from actors.ray._inputs import ChildInput, RunInput, TellInput
from actors.ray._server import HostServer
from actors.ray._wire import Taken, TreeSeed
from actors.testing import ScriptedModel, call

from .inprocess import BOUND, closed, host_server


class _Ref:
    def __init__(self, future: concurrent.futures.Future[Any]) -> None:
        self._future = future

    def future(self) -> concurrent.futures.Future[Any]:
        return self._future


class Transport:
    """Stands in for Ray calls to other hosts: records them; the test answers them."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, str, tuple[Any, ...], concurrent.futures.Future[Any]]] = []
        self.lock = threading.Lock()
        self.delivered = threading.Semaphore(0)

    def __call__(self, index: int, method: str, *args: Any) -> _Ref:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self.lock:
            self.calls.append((index, method, args, future))
        if method == "deliver":
            self.delivered.release()
        return _Ref(future)

    def delivers(self) -> list[tuple[tuple[Any, ...], concurrent.futures.Future[Any]]]:
        with self.lock:
            calls = list(self.calls)
        return [(args[0], future) for _, method, args, future in calls if method == "deliver"]


@pytest.fixture
def server() -> Iterator[HostServer]:
    with host_server(("host-0", "host-1")) as host:
        yield host


def test_a_parent_s_cancel_follows_its_remote_child_s_run(
    server: HostServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    transport = Transport()
    monkeypatch.setattr(server.peers, "call", transport)
    worker = Agent("worker", model=ScriptedModel(["never"], latency=30))
    lead = Agent(
        "lead",
        model=ScriptedModel([call("far", task="t"), "done"]),
        subagents=[Subagent(worker, name="far", placement="spread")],
    )
    server.spawn("lead", lead, TreeSeed(None, None, None), {})
    deliver(server, [RunInput("lead", None, "run", "go", "run", stream=False)])
    assert transport.delivered.acquire(timeout=BOUND)  # the child's run is out
    server.local.send("lead", CancelRun("enough"))
    assert closed(server, "run").value.status == "cancelled"  # the lead cancelled its child
    ((first, taken),) = transport.delivers()  # the cancel waits: the run is not taken yet
    (child_run,) = first
    assert isinstance(child_run, ChildInput)
    assert child_run.child_id == "lead-sub-1"
    assert child_run.adopt is not None
    taken.set_result([Taken()])
    assert transport.delivered.acquire(timeout=BOUND)
    (_, (second, _)) = transport.delivers()
    (cancel,) = second
    assert isinstance(cancel, TellInput)
    assert cancel.agent_id == "lead-sub-1"
    assert isinstance(cancel.message, CancelRun)
