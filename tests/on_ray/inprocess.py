"""An agent host's server run in-process (no Ray), and reading what its outboxes closed with."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from actors import TreeLimits
from actors.ray._outbox import Closed
from actors.ray._server import HostConfig, HostServer

BOUND = 30.0


@contextmanager
def host_server(hosts: tuple[str, ...]) -> Iterator[HostServer]:
    """Host 0 of a runtime of ``hosts``, shut down after."""
    config = HostConfig(
        limits=TreeLimits(),
        workers=2,
        max_tool_threads=2,
        default_model=None,
        placement="parent",
        tool_context_factory=None,
    )
    host = HostServer(0, hosts, "tests", config)
    try:
        yield host
    finally:
        host.shutdown(5)


def closed(server: HostServer, key: str) -> Any:
    """What the outbox ``key`` closed with (waiting for it)."""
    items, waiter = server.take(key)
    while not items and waiter is not None:
        waiter.result(BOUND)
        items, waiter = server.take(key)
    (item,) = items
    assert isinstance(item, Closed)
    return item.outcome
