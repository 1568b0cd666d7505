"""Every in-process host runs the host conformance suite (Ray's run it in tests/on_ray)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from actors import Agent, Runtime
from actors.host.conformance import HostConformance, PassivationConformance, PeerConformance
from actors.sim import Simulation
from actors.store import SQLiteStore
from actors.testing import SyncDriver


class TestRuntime(PeerConformance, PassivationConformance):
    def make_store(self, tmp_path: Path) -> SQLiteStore:
        return SQLiteStore(tmp_path / "sessions.db")

    @contextmanager
    def open_host(self, tmp_path: Path) -> Iterator[Runtime]:
        with Runtime() as runtime:
            yield runtime


class TestSimulation(PeerConformance):
    @contextmanager
    def open_host(self, tmp_path: Path) -> Iterator[Simulation]:
        yield Simulation(seed=1)

    def settle(self, host: Any, done: threading.Event) -> None:
        host.run()  # until nothing is left to happen
        assert done.is_set()


class _DriverHandle:
    """A `SyncDriver` behind the handle the suite uses."""

    def __init__(self, driver: SyncDriver) -> None:
        self._driver = driver

    def run(self, prompt: str) -> Any:
        return self._driver.run(prompt)

    def resume(self, answers: Mapping[str, Any]) -> Any:
        return self._driver.resume(answers)

    def cancel(self, reason: str = "cancelled") -> None:
        self._driver.cancel(reason)

    def context(self) -> Any:
        return self._driver.context

    def tree(self) -> Any:
        return self._driver.tree()

    def subscribe(self, callback: Any) -> Any:
        return self._driver.subscribe(callback)

    @property
    def agent_id(self) -> str:
        return self.tree().agent_id


class _Drivers:
    """Spawning a root makes a driver of its own (a driver runs one tree)."""

    def __init__(self) -> None:
        self.drivers: list[SyncDriver] = []

    def spawn(
        self, agent: Agent[Any], *, tool_context: Any = None, metadata: Any = None
    ) -> _DriverHandle:
        driver = SyncDriver(agent, tool_context=tool_context, metadata=metadata)
        self.drivers.append(driver)
        return _DriverHandle(driver)


class TestSyncDriver(HostConformance):
    @contextmanager
    def open_host(self, tmp_path: Path) -> Iterator[_Drivers]:
        host = _Drivers()
        try:
            yield host
        finally:
            for driver in host.drivers:
                driver.close()


def test_an_agent_ref_is_not_built_by_hand() -> None:
    from actors import AgentRef
    from actors.exceptions import UserError

    with pytest.raises(UserError, match="get one from spawn"):
        AgentRef(None, "someone", name="x")
