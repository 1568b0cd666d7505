"""Fixtures of the agent-loop tests: a runtime that stops every actor it started."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from actors import Runtime
from actors.testing import FakeClock


@pytest.fixture
def rt() -> Iterator[Runtime]:
    with Runtime(clock=FakeClock()) as runtime:
        yield runtime
