"""`RunResult`: what a run gives its caller.

Status, output, messages, events, metadata, usage, and the requests a suspended run waits on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal

from typing_extensions import TypeVar

from actors.context._events import Event
from actors.context._messages import Message
from actors.context._quick_init import quick_init
from actors.context._suspension import Request
from actors.context._usage import Usage

__all__ = ["RunResult", "RunStatus"]

OutputT = TypeVar("OutputT", default=Any)

RunStatus = Literal["completed", "suspended", "cancelled"]


@quick_init
@dataclass(frozen=True, slots=True)
class RunResult(Generic[OutputT]):
    """How a run ended, and what it produced.

    Attributes:
        status: ``"completed"`` (``output`` holds the answer), ``"suspended"`` (``requests``
            wait for the host; answer them with ``ref.resume``) or ``"cancelled"``.
        output: The final answer: text, or an instance of the agent's ``output_type``.
        messages: The agent's whole transcript after the run: an immutable sequence that
            compares equal to a tuple of the same messages (a view, not a copy).
        usage: What this agent consumed in this run.
        tree_usage: ``usage`` plus everything its subagents consumed in this run.
        metadata: The agent's metadata after the run, as a deep read-only view (mappings are
            read-only, lists are tuples), the same shape tools see in ``ctx.metadata``.
        events: The events this run appended to the agent's log: an immutable sequence that
            compares equal to a tuple of the same events (a view, read when looked at).
        agent_id: The agent that ran.
        run_id: The run's id.
        requests: The open requests of a suspended run, from this agent or any descendant.
    """

    status: RunStatus
    output: OutputT | None
    messages: Sequence[Message]
    usage: Usage
    tree_usage: Usage
    metadata: Mapping[str, Any]
    events: Sequence[Event]
    agent_id: str
    run_id: str
    requests: tuple[Request, ...] = field(default=())

    @property
    def completed(self) -> bool:
        """Whether the run reached a final answer."""
        return self.status == "completed"

    @property
    def suspended(self) -> bool:
        """Whether the run waits for answers to ``requests``."""
        return self.status == "suspended"
