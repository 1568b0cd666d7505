"""`RayRuntime` runs the host conformance suite, with agents spread over two agent hosts."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from actors.host.conformance import PassivationConformance, PeerConformance


class TestRayRuntime(PassivationConformance, PeerConformance):
    # Roots are spread over the two hosts: the peer tests send between hosts.

    @pytest.fixture
    def host_ready(self, ray_cluster: Any) -> None:
        """The session's local Ray cluster."""

    def make_store(self, tmp_path: Path) -> Any:
        from actors.store import SQLiteStore

        return SQLiteStore(tmp_path / "sessions.db")

    @contextmanager
    def open_host(self, tmp_path: Path) -> Iterator[Any]:
        from actors.ray import RayRuntime

        with RayRuntime(hosts=2) as runtime:
            yield runtime
