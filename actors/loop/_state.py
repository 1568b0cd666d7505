"""The state an agent loop keeps between inputs, its limits, and the base its parts share."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from actors._logging import LazyLogger, get_logger
from actors.context._agent_context import AgentContext
from actors.context._cancel import CancellationToken
from actors.context._messages import ToolCall, UserMessage
from actors.context._suspension import Answer, Request
from actors.context._usage import Usage
from actors.exceptions import ActorsError
from actors.loop._agent import Agent, Subagent
from actors.loop._output import OutputSchema
from actors.loop._tools import Tool
from actors.loop._types import CallTool, Effect, ToolOutcome
from actors.models._model import Model

__all__ = [
    "INTERRUPTED",
    "INVALID_ARGUMENTS_KEY",
    "NOT_EXECUTED",
    "LoopStatus",
    "TreeLimits",
]

LoopStatus = Literal["idle", "running", "suspended"]

_log = get_logger("actors.agent")

NOT_EXECUTED = "Tool call was not executed: {reason}"
INTERRUPTED = "Tool call was interrupted before it finished (it may have had effects): {reason}"

# The providers' marker for arguments that were not a JSON object (actors.models
# INVALID_ARGUMENTS_KEY). Spelled out so the loop does not import the HTTP providers; a test
# keeps the two equal.
INVALID_ARGUMENTS_KEY = "__actors_invalid_arguments__"


@dataclass(frozen=True, slots=True)
class TreeLimits:
    """Limits against runaway agent trees.

    Attributes:
        max_depth: How deep below the root a child may be (the root is depth 0).
        max_children: How many children of one agent may be live at once: started (as
            subagent calls or with ``ctx.delegate``) and not yet finished, suspended ones
            included. Not a count over the agent's life: a child that finished frees its
            place, across runs, passivation and restore. A spawn past the limit is refused
            with an error result for the model (an error raised in the tool, for
            ``ctx.delegate``); the agent and its other children carry on.
        max_agents: How many agents one tree may hold at once, the root included.
    """

    max_depth: int = 5
    max_children: int = 100
    max_agents: int = 1000


@dataclass(slots=True)
class _Call:
    """One tool (or subagent) call of the current step, and what became of it."""

    call: ToolCall
    state: Literal["running", "queued", "done", "parked", "applied"] = "running"
    outcome: ToolOutcome | None = None
    token: CancellationToken | None = None
    request: Request | None = None  # the open request of a parked call
    child_id: str | None = None
    child_requests: tuple[Request, ...] = ()  # open requests of a parked child
    approval: bool = False  # parked waiting for the host to approve it
    unlogged: bool = False  # parked, its `suspended` event not yet written
    child_note: dict[str, Any] | None = None  # a `subagent_finished` event not yet written
    child_usage: Usage | None = None  # a suspended child's tree usage so far


@dataclass(slots=True)
class _Chain:
    """The calls of one sequential tool in the current step: one runs, the others wait."""

    snapshot: Mapping[str, Any]  # what the next call sees: the step's, plus earlier updates
    busy: bool = False
    waiting: deque[tuple[_Call, Mapping[str, Any], Answer | None]] = field(default_factory=deque)


@dataclass(slots=True)
class _Validation:
    """An answer going through the output validators, one at a time."""

    output: Any  # as the validators before this one left it
    index: int  # the validator running
    effect_id: str  # the id its `ToolFinished` comes back with
    call_id: str | None  # the final_result call it answers, or None for a text answer


_NO_USAGE = Usage()


@dataclass(slots=True)
class _Run:
    """The run in progress (running or suspended)."""

    run_id: str
    reply: Any
    token: CancellationToken
    start_usage: Usage
    start_seq: int
    step: int = 0
    calls: dict[str, _Call] = field(default_factory=dict)
    retries: dict[str, int] = field(default_factory=dict)
    output_retries: int = 0
    final: tuple[Any] | None = None
    steering: list[tuple[UserMessage, str]] = field(default_factory=list)  # (message, source)
    children_usage: Usage = _NO_USAGE  # immutable: replaced, never changed in place
    validated: dict[str, dict[str, Any]] = field(default_factory=dict)
    awaiting_model: bool = False
    delegated: set[str] = field(default_factory=set)  # children started by tools, running
    chains: dict[str, _Chain] = field(default_factory=dict)  # by sequential tool name
    validation: _Validation | None = None
    failure: ActorsError | None = None  # ends the run once the step's results are applied
    compacting: Any = None  # the compaction `Plan` whose summary is awaited
    compactions: int = 0  # compactions since the last request was sent
    overflowed: bool = False  # the provider refused this step's request as too long


class _LoopCore:
    """What the parts of `AgentLoop` share: its state, and the steps each part calls.

    `AgentLoop` is assembled from parts along the loop's seams (children, suspension); each
    part reads this state and calls these steps, which `AgentLoop` implements.
    """

    spec: Agent[Any]
    ctx: AgentContext
    model: Model
    tool_context: Any
    tool_view: Any  # the read-only view of tool_context that tools (and validators) get
    depth: int
    limits: TreeLimits
    approval_handler: bool
    current_tool: str | None
    _tools: dict[str, Tool]
    _subagents: dict[str, Subagent]
    _run: _Run | None
    _children_spawned: int  # numbers child ids ("<id>-sub-<n>"), never reused; not a limit
    _kept: dict[str, str]
    _output: OutputSchema | None
    _use_output_tool: bool
    _validators: tuple[Tool, ...]

    @property
    def status(self) -> LoopStatus:
        raise NotImplementedError

    @property
    def log(self) -> LazyLogger:
        """The agent's logger, with its ids bound (and the run's, while one is in progress)."""
        run_id = self._run.run_id if self._run is not None else self.ctx.run_id
        return _log.bind(agent_id=self.ctx.agent_id, parent_id=self.ctx.parent_id, run_id=run_id)

    def next_run_id(self) -> str:
        raise NotImplementedError

    def _settle(self) -> list[Effect]:
        raise NotImplementedError

    def _next_step(self) -> list[Effect]:
        raise NotImplementedError

    def _complete(self, output: Any) -> list[Effect]:
        raise NotImplementedError

    def _fail(self, error: ActorsError, reason: str) -> list[Effect]:
        raise NotImplementedError

    def _call_tool(
        self,
        slot: _Call,
        tool: Tool,
        arguments: Mapping[str, Any],
        snapshot: Mapping[str, Any],
        answer: Answer | None,
    ) -> CallTool:
        raise NotImplementedError

    def _launch(
        self,
        slot: _Call,
        tool: Tool,
        arguments: Mapping[str, Any],
        snapshot: Mapping[str, Any],
        answer: Answer | None,
    ) -> list[Effect]:
        raise NotImplementedError
