from __future__ import annotations

import pytest

from actors import AgentContext

from .helpers import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def ctx(clock: FakeClock) -> AgentContext:
    return AgentContext("agent-1", name="writer", clock=clock)
