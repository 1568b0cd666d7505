"""Suite-wide guards: no real model requests, and no actor may outlive its test."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pykka
import pytest
import structlog

# Network-backed models refuse to run anywhere in the suite (tests that need one switch it on
# against a loopback server explicitly).
os.environ.setdefault("ACTORS_ALLOW_MODEL_REQUESTS", "0")


@pytest.fixture(autouse=True)
def _no_actor_outlives_its_test() -> Iterator[None]:
    before = set(pykka.ActorRegistry.get_all())
    yield
    leaked = [ref for ref in pykka.ActorRegistry.get_all() if ref not in before]
    if leaked:
        for ref in leaked:  # stop them so one leak does not hang the whole run
            ref.stop(block=False)
        pytest.fail(
            f"{len(leaked)} actor(s) outlived the test: "
            f"{[ref.actor_class.__name__ for ref in leaked][:5]}; use `with Runtime() as rt:`"
        )


@pytest.fixture(autouse=True)
def _library_logging_back_to_quiet() -> Iterator[None]:
    # structlog.testing.capture_logs() leaves structlog "configured" (with its default console
    # renderer) after it returns; the library would then print the lines of every later test.
    configured = structlog.is_configured()
    yield
    if not configured:
        structlog.reset_defaults()
