"""Fixtures of the suspension, cancellation and steering tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from actors import Runtime
from actors.testing import FakeClock


@pytest.fixture
def rt() -> Iterator[Runtime]:
    with Runtime(clock=FakeClock()) as runtime:
        yield runtime
