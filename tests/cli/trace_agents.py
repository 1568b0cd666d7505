"""Agents that the ``--trace`` tests run with ``actors run``: one answers, one fails."""

from __future__ import annotations

from actors import Agent, Message
from actors.testing import FunctionModel, ScriptedModel


def _down(messages: list[Message], _tools: object) -> object:
    raise RuntimeError("the provider is down")


helper = Agent("helper", model=ScriptedModel(["all done"]))
broken = Agent("broken", model=FunctionModel(_down))
