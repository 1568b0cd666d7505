"""Every in-process host runs the host conformance suite (Ray's run it in tests/on_ray)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from actors import Agent, Runtime
from actors.host.conformance import HostConformance
from actors.sim import Simulation
from actors.testing import SyncDriver


class TestRuntime(HostConformance):
    @contextmanager
    def open_host(self, tmp_path: Path) -> Iterator[Runtime]:
        with Runtime() as runtime:
            yield runtime


class TestSimulation(HostConformance):
    @contextmanager
    def open_host(self, tmp_path: Path) -> Iterator[Simulation]:
        yield Simulation(seed=1)

    def settle(self, host: Any, done: threading.Event) -> None:
        host.run()
        assert done.is_set()


class _DriverHandle:
    """A `SyncDriver` behind the handle the suite uses."""

    def __init__(self, driver: SyncDriver) -> None:
        self._driver = driver
        self.agent_id = driver._id

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


class _DriverHost:
    def __init__(self) -> None:
        self.drivers: list[SyncDriver] = []

    def spawn(
        self, agent: Agent[Any], *, tool_context: Any = None, metadata: Any = None
    ) -> _DriverHandle:
        driver = SyncDriver(agent, tool_context=tool_context, metadata=metadata)
        self.drivers.append(driver)
        return _DriverHandle(driver)


class TestSyncDriver(HostConformance):
    peers_between_roots = False  # a driver runs one tree

    @contextmanager
    def open_host(self, tmp_path: Path) -> Iterator[_DriverHost]:
        host = _DriverHost()
        try:
            yield host
        finally:
            for driver in host.drivers:
                driver.close()
