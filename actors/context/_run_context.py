"""`RunContext`: what a tool receives.

Read-only views of its agent's state (``tool_context``, a metadata snapshot, usage, retry,
cancellation, deadline, the answer of a resumed request) and ``delegate`` to run a child.
Built by the loop; a tool never gets the live context.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Generic, Protocol

from typing_extensions import TypeVar

from actors.context._cancel import CancellationToken
from actors.context._suspension import Answer
from actors.context._usage import Usage
from actors.exceptions import UserError

__all__ = [
    "Delegator",
    "RunContext",
    "ToolContextT",
    "unchecked_run_context",
    "with_delegator",
]

ToolContextT = TypeVar("ToolContextT", default=Mapping[str, Any])

_EMPTY: Mapping[str, Any] = MappingProxyType({})


class Delegator(Protocol):
    """What the runtime plugs into a `RunContext` so a tool can hand a task to a child agent.

    It starts the child and returns at once with a future of the child's output; the runtime
    guarantees the future ends (with the output or an error) within ``timeout`` seconds.
    """

    def __call__(
        self, agent: Any, task: str, /, *, timeout: float
    ) -> concurrent.futures.Future[Any]: ...


# No slots: on Python 3.11 a frozen slotted dataclass cannot be instantiated through its
# generic alias (``RunContext[Deps](...)`` fails setting ``__orig_class__``).
@dataclass(frozen=True)
class RunContext(Generic[ToolContextT]):
    """What a tool function receives: read-only views of its agent, never the live state.

    A tool changes its agent only by returning a `ContextUpdate`. Type the first parameter of a
    tool as ``RunContext[MyDeps]`` and the type checker knows what ``ctx.tool_context`` holds.

    Attributes:
        tool_context: The static channel: set by the caller at the root and forwarded unchanged
            to every descendant. Never stored, never logged.
        metadata: A deep, read-only snapshot of the agent's metadata, taken before the step. Every
            tool of one step sees the same snapshot.
        agent_id: The id of the agent running the tool.
        parent_id: The id of its parent agent, or None at the root.
        run_id: The id of the current run.
        tool_call_id: The id of the call being executed.
        tool_name: The name of the tool being executed.
        retry: How many times this tool's arguments failed validation before in this run.
        usage: The agent's usage when the step started.
        timeout: The tool's timeout in seconds, or None when unset.
        cancellation: Set when the run is cancelled or the tool times out.
        answer: The host's `Answer` when this call resumes a suspension, else None.
    """

    tool_context: ToolContextT = field(default_factory=lambda: _EMPTY)  # type: ignore[assignment]
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    agent_id: str = ""
    parent_id: str | None = None
    run_id: str = ""
    tool_call_id: str = ""
    tool_name: str = ""
    retry: int = 0
    usage: Usage = field(default_factory=Usage)
    timeout: float | None = None
    cancellation: CancellationToken = field(default_factory=CancellationToken)
    answer: Answer | None = None
    _delegator: Delegator | None = field(default=None, repr=False, compare=False)

    def __repr__(self) -> str:
        # The static channel may hold secrets and connections: its type, never its values.
        shown = [f"tool_context=<{type(self.tool_context).__name__}>"]
        shown += [
            f"{f.name}={getattr(self, f.name)!r}"
            for f in fields(self)
            if f.repr and f.name != "tool_context"
        ]
        return f"RunContext({', '.join(shown)})"

    @property
    def cancelled(self) -> bool:
        """Whether the run (or this call) was cancelled or timed out."""
        return self.cancellation.cancelled

    def raise_if_cancelled(self) -> None:
        """Raise `actors.exceptions.Cancelled` if the run or this call was cancelled."""
        self.cancellation.raise_if_cancelled()

    def _start_delegation(self, agent: Any, task: str, timeout: float) -> Any:
        if self._delegator is None:
            raise UserError(
                "delegate() needs a running agent: this RunContext was built outside a runtime; "
                "run the tool through Runtime.spawn (or SyncDriver)"
            )
        return self._delegator(agent, task, timeout=timeout)

    def delegate(self, agent: Any, task: str, /, *, timeout: float = 300.0) -> Any:
        """Run ``agent`` as a child of this tool's agent on ``task`` and return its output.

        The child gets the same forwarding (``tool_context`` unchanged, a copy of the metadata
        the tool sees), limits and bookkeeping as a subagent the model calls. Blocks the tool's
        thread, never the agent; in an ``async`` tool use `adelegate`.

        Args:
            agent: The child's spec.
            task: The child's task.
            timeout: Seconds the child may take; it is cancelled past them.

        Raises:
            UserError: Not inside an agent runtime, called from an async tool, or refused by
                a tree limit.
            RunError: The child failed or timed out.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise UserError(
                "delegate() blocks, and this tool runs on the event loop: "
                "use `await ctx.adelegate(...)` in an async tool"
            )
        future = self._start_delegation(agent, task, timeout)
        return future.result()

    async def adelegate(self, agent: Any, task: str, /, *, timeout: float = 300.0) -> Any:
        """`delegate` for async tools: awaits the child without blocking the event loop."""
        future = self._start_delegation(agent, task, timeout)
        return await asyncio.wrap_future(future)


_set = object.__setattr__


def unchecked_run_context(
    tool_context: Any,
    metadata: Mapping[str, Any],
    agent_id: str,
    parent_id: str | None,
    run_id: str,
    tool_call_id: str,
    tool_name: str,
    retry: int,
    usage: Usage,
    timeout: float | None,
    cancellation: CancellationToken,
    answer: Answer | None,
) -> RunContext[Any]:
    """``RunContext(...)`` with every field given, at the cost of one dict (one per tool call).

    A frozen dataclass sets its fields one ``object.__setattr__`` at a time; the agent builds
    one per tool call from values it holds, so it sets them all at once.
    """
    ctx: RunContext[Any] = object.__new__(RunContext)
    _set(
        ctx,
        "__dict__",
        {
            "tool_context": tool_context,
            "metadata": metadata,
            "agent_id": agent_id,
            "parent_id": parent_id,
            "run_id": run_id,
            "tool_call_id": tool_call_id,
            "tool_name": tool_name,
            "retry": retry,
            "usage": usage,
            "timeout": timeout,
            "cancellation": cancellation,
            "answer": answer,
            "_delegator": None,
        },
    )
    return ctx


def with_delegator(ctx: RunContext[ToolContextT], delegator: Delegator) -> RunContext[ToolContextT]:
    """A copy of ``ctx`` whose tools delegate through ``delegator`` (what a host plugs in).

    ``dataclasses.replace(ctx, _delegator=delegator)``, without rebuilding every field.
    """
    copied: RunContext[ToolContextT] = object.__new__(type(ctx))
    _set(copied, "__dict__", {**ctx.__dict__, "_delegator": delegator})
    return copied
