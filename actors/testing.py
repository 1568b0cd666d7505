"""Test doubles and helpers: run agents offline, reproducibly, with no network.

- `ScriptedModel`: a fixed list of replies; records the requests it saw.
- `FunctionModel`: replies computed by a function of the messages and tools.
- `TestModel`: calls every tool once with schema-made arguments, then answers.
- `call`: a tool call for a script (`seed_call_ids` makes its ids reproducible).
- `FakeClock`: timestamps that advance only when told to.
- `SyncDriver`: drives an agent's state machine on the calling thread (no actors, no threads).
- `allow_model_requests`: switch real (network) model requests off for a test suite.
"""

from actors.context._fake_clock import FakeClock
from actors.models._model import allow_model_requests, model_requests_allowed
from actors.models._test_model import TestModel
from actors.models._test_models import (
    FunctionModel,
    Reply,
    ScriptedModel,
    call,
    seed_call_ids,
)
from actors.runtime._sync_driver import SyncDriver

__all__ = [
    "FakeClock",
    "FunctionModel",
    "Reply",
    "ScriptedModel",
    "SyncDriver",
    "TestModel",
    "allow_model_requests",
    "call",
    "model_requests_allowed",
    "seed_call_ids",
]
