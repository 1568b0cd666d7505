"""Latency of the test models: seconds, or a function of the request and a random source."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TypeAlias

from actors.exceptions import UserError
from actors.models._model import ModelRequest

__all__ = ["Latency", "check_latency", "latency_of"]

Latency: TypeAlias = "float | Callable[[ModelRequest, random.Random], float]"
"""Seconds a reply takes: a number, or a function of the request and a seeded random source
(a `Simulation` passes its own; on a `Runtime` it is the model's, seeded with 0)."""


def check_latency(latency: Latency) -> Latency:
    if callable(latency):
        return latency
    if isinstance(latency, bool) or not isinstance(latency, int | float) or latency < 0:
        raise UserError(
            f"latency is seconds (>= 0) or a function (request, rng) -> seconds, got {latency!r}"
        )
    return float(latency)


def latency_of(latency: Latency, request: ModelRequest, rng: random.Random) -> float:
    if not callable(latency):
        return latency
    seconds = latency(request, rng)
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
        raise UserError(f"a latency function must return seconds (>= 0), got {seconds!r}")
    return float(seconds)
