"""Output validators: the user's last word on a final answer, run like tools, off the agent.

An output validator is a function of the `RunContext` and the output; it returns the output to
use (None keeps it as it was) or raises `ModelRetry` to send the model back with a message.
Each runs as a `CallTool` effect of its own, one after another, so a sync validator runs on a
tool thread and an async one on the event loop, under the agent's ``tool_timeout``, exactly
as tools do: the agent's thread never waits on one.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, create_model

from actors.context._run_context import RunContext
from actors.exceptions import ModelRetry
from actors.loop._agent import OutputValidator, validator_name
from actors.loop._tools import Tool
from actors.loop._types import ToolOutcome

__all__ = ["Verdict", "validator_tool"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """What one validator said, carried back in `ToolOutcome.output`."""

    output: Any = None
    retry: str | None = None  # the message for the model
    error: BaseException | None = None  # the validator itself failed


_NoArguments: type[BaseModel] = create_model("output_validator_arguments")


def _verdict(value: Any, output: Any) -> ToolOutcome:
    kept = output if value is None else value
    return ToolOutcome(content="", output=Verdict(output=kept))


def _retry(retry: ModelRetry) -> ToolOutcome:
    return ToolOutcome(content=retry.message, is_error=True, output=Verdict(retry=retry.message))


def _failed(exc: Exception) -> ToolOutcome:
    text = f"{type(exc).__name__}: {exc}"
    return ToolOutcome(content=text, is_error=True, output=Verdict(error=exc))


def validator_tool(validator: OutputValidator) -> Tool:
    """A `Tool` that runs ``validator`` and reports a `Verdict` (it never raises)."""
    if inspect.iscoroutinefunction(validator):

        async def run_async(ctx: RunContext[Any], output: Any) -> ToolOutcome:
            try:
                return _verdict(await validator(ctx, output), output)
            except ModelRetry as retry:
                return _retry(retry)
            except Exception as exc:  # a broken validator fails the run, with its cause
                return _failed(exc)

        function: Callable[..., Any] = run_async
    else:

        def run_sync(ctx: RunContext[Any], output: Any) -> ToolOutcome:
            try:
                return _verdict(validator(ctx, output), output)
            except ModelRetry as retry:
                return _retry(retry)
            except Exception as exc:  # a broken validator fails the run, with its cause
                return _failed(exc)

        function = run_sync
    return Tool(
        name=validator_name(validator),
        description="output validator",
        function=function,
        args_model=_NoArguments,
        parameters={},
        takes_ctx=True,
        is_async=inspect.iscoroutinefunction(validator),
    )
