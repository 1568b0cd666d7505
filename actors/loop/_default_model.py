"""Which model an agent runs: its own, else the host's default, else the environment's.

An agent without a model never falls back to a test double: an agent that silently answers
from a `TestModel` in production is worse than one that refuses to start. The order is

1. ``Agent(model=...)``;
2. the host's default (``Runtime(default_model=...)``, ``SyncDriver(default_model=...)``);
3. the ``ACTORS_DEFAULT_MODEL`` environment variable, a model string such as
   ``"openai:gpt-4o-mini"`` (``"test"`` names a `TestModel`, for test suites);
4. a `UserError` saying how to give one.

Every host calls `resolve_model` (and `require_models` before it starts a tree), so they all
agree.
"""

from __future__ import annotations

import os
import threading
from typing import Any, cast

from actors.exceptions import UserError
from actors.loop._agent import Agent
from actors.models._model import Model

__all__ = ["DEFAULT_MODEL_ENV", "default_model_of", "require_models", "resolve_model"]

DEFAULT_MODEL_ENV = "ACTORS_DEFAULT_MODEL"

_FROM_ENV: dict[str, Model] = {}  # one model per spec string: agents share its HTTP client
_FROM_ENV_LOCK = threading.Lock()


def default_model_of(value: Model | str | None) -> Model | None:
    """Check a host's ``default_model`` argument; a model string becomes a model.

    Raises:
        UserError: neither a `Model`, a model string nor None (or an unknown provider).
    """
    if value is None:
        return None
    from actors.models._infer import infer_model

    if not isinstance(value, Model | str):
        raise UserError(
            f"default_model must be a Model or a model string such as 'openai:gpt-4o-mini', "
            f"got {type(value).__name__}"
        )
    return infer_model(value)


def _from_env() -> Model | None:
    spec = os.environ.get(DEFAULT_MODEL_ENV, "").strip()
    if not spec:
        return None
    with _FROM_ENV_LOCK:
        model = _FROM_ENV.get(spec)
        if model is None:
            from actors.models._infer import infer_model

            try:
                model = infer_model(spec)
            except UserError as exc:
                raise UserError(f"{DEFAULT_MODEL_ENV}={spec!r} is not a model: {exc}") from None
            _FROM_ENV[spec] = model
        return model


def resolve_model(spec: Agent[Any], default: Model | None = None) -> Model:
    """The model an agent of ``spec`` runs (see the module's order).

    Raises:
        UserError: the spec names no model and there is no default.
    """
    model = spec.model
    if model is not None:
        # A string was resolved when the spec was made. (No isinstance check: against the
        # Model protocol it costs microseconds, and this runs for every spawn.)
        return cast(Model, model)
    if default is not None:
        return default
    model = _from_env()
    if model is None:
        raise UserError(
            f"agent {spec.name!r} has no model: pass Agent(model=...) (such as "
            f"'openai:gpt-4o-mini'), give the runtime one with Runtime(default_model=...), or "
            f"set the {DEFAULT_MODEL_ENV} environment variable. In tests, use a test model "
            "from actors.testing (ScriptedModel, FunctionModel, TestModel)"
        )
    return model


def require_models(spec: Agent[Any], default: Model | None = None) -> None:
    """Check that ``spec`` and every subagent below it has a model, before anything starts.

    Raises:
        UserError: one of them has none and there is no default; the message names it.
    """
    seen: set[int] = set()
    todo = [spec]
    while todo:
        agent = todo.pop()
        if id(agent) in seen:
            continue
        seen.add(id(agent))
        if agent.model is None:
            resolve_model(agent, default)  # raises naming the agent when there is no default
            return  # a default exists: every spec without a model gets it
        todo.extend(sub.agent for sub in agent.subagent_map.values())
