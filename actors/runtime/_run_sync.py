"""`run_sync`: one agent, one prompt, one result, with a `Runtime` opened and closed around it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from actors.context._parts import ContentInput
from actors.context._result import RunResult
from actors.loop._agent import Agent
from actors.runtime._runtime import Runtime

__all__ = ["run_sync"]

OutputT = TypeVar("OutputT")


def run_sync(
    agent: Agent[OutputT],
    prompt: ContentInput,
    *,
    tool_context: Any = None,
    metadata: Mapping[str, Any] | None = None,
    timeout: float | None = None,
) -> RunResult[OutputT]:
    """Run ``agent`` once on ``prompt`` in a fresh runtime and return the result (for scripts).

    Example:
        >>> from actors.testing import ScriptedModel
        >>> run_sync(Agent("echo", model=ScriptedModel(["hello"])), "Say hello").output
        'hello'
    """
    with Runtime() as runtime:
        ref = runtime.spawn(agent, tool_context=tool_context, metadata=metadata)
        return ref.run(prompt, timeout=timeout)
