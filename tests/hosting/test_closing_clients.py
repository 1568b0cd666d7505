"""A model's client is closed once no live agent uses it, even as the runtime closes.

An agent's stop starts closing its model's client on the effects loop; a runtime's shutdown
then drains that loop (it cancels what is still running there) and stops it. A close the
drain cancels, or never sees, leaves a connection open when the loop stops: an ``unclosed
transport`` ResourceWarning at best. These tests force the orderings that happen by chance.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from actors import Agent, AssistantMessage, ModelRequest, ModelResponse, Runtime, Usage
from actors.models import FallbackModel
from actors.runtime._effects import EffectRunner

BOUND = 30.0


class _ClientModel:
    """A model with a client to close, counting how often it was closed."""

    def __init__(self, name: str = "client") -> None:
        self.name = name
        self.closed = 0

    async def request(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(AssistantMessage(content="ok"), Usage(requests=1))

    async def aclose(self) -> None:
        self.closed += 1


class _PartsModel(_ClientModel):
    """A model that closes its parts concurrently, each in a task of its own."""

    def __init__(self) -> None:
        super().__init__("parts")
        self.parts = [_ClientModel("primary"), _ClientModel("backup")]

    async def aclose(self) -> None:
        await asyncio.gather(*(part.aclose() for part in self.parts))


def _hold_until_drain_queued(
    loop: asyncio.AbstractEventLoop,
    monkeypatch: pytest.MonkeyPatch,
    meanwhile: Callable[[], None] = lambda: None,
) -> threading.Event:
    """Hold ``loop`` until a close has queued its drain there; run ``meanwhile`` just then.

    What was queued on the loop before then runs back to back with the drain. Returns an
    event set once the drain was queued (a test checks it, so the hold cannot pass unused).
    """
    held = threading.Event()
    hold = threading.Event()
    queued = threading.Event()

    def block() -> None:
        held.set()
        hold.wait(BOUND)

    loop.call_soon_threadsafe(block)
    assert held.wait(BOUND)
    queue = asyncio.run_coroutine_threadsafe

    def queue_then_let_go(coro: Any, to: asyncio.AbstractEventLoop) -> Any:
        future = queue(coro, to)
        if to is loop and not queued.is_set():
            queued.set()
            meanwhile()
            hold.set()
        return future

    monkeypatch.setattr(asyncio, "run_coroutine_threadsafe", queue_then_let_go)
    return queued


@pytest.mark.parametrize(
    "build",
    [
        lambda: _PartsModel(),
        lambda: FallbackModel(_ClientModel("primary"), _ClientModel("backup")),
    ],
    ids=["parts", "fallback"],
)
def test_a_close_that_starts_tasks_finishes_when_the_runtime_closes(
    build: Callable[[], Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # FallbackModel closes its models under a gather: a task each. The shutdown's drain,
    # right behind the agent's stop, must let those tasks finish rather than cancel them.
    model = build()
    parts: list[_ClientModel] = list(getattr(model, "parts", None) or model.models)
    with Runtime() as rt:
        rt.spawn(Agent("a", model=model)).run("hi", timeout=BOUND)
        drain_queued = _hold_until_drain_queued(rt._host.effects.loop, monkeypatch)
    assert drain_queued.is_set()
    assert [part.closed for part in parts] == [1, 1]


def test_a_model_released_while_the_effects_close_is_still_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An agent that outlived the shutdown's wait stops while the effects are closing: its
    # model must still be closed (by the drain), not dropped by both sides.
    runner = EffectRunner(max_workers=1)
    model = _ClientModel()
    runner.retain(model)
    drain_queued = _hold_until_drain_queued(
        runner.loop, monkeypatch, meanwhile=lambda: runner.release(model)
    )
    runner.close()
    assert drain_queued.is_set()
    assert model.closed == 1
