"""The messages an agent's state machine takes, and the effects it asks its host to carry out.

All of them are frozen: pykka hands messages across threads by reference. A dozen are built
per step, so each gets a quick constructor (`quick_init`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from actors.context._messages import ToolCall, UserMessage
from actors.context._parts import Content
from actors.context._quick_init import quick_init
from actors.context._result import RunResult
from actors.context._run_context import RunContext
from actors.context._suspension import Answer, Request
from actors.context._update import ContextUpdate
from actors.context._usage import Usage
from actors.exceptions import ActorsError
from actors.loop._agent import Subagent
from actors.loop._tools import Tool
from actors.models._model import ModelRequest, ModelResponse

__all__ = [
    "ApprovalDecided",
    "AskApproval",
    "CallModel",
    "CallTool",
    "CancelChild",
    "CancelRun",
    "ChildFinished",
    "Effect",
    "Finish",
    "Input",
    "ModelReplied",
    "PeerMessage",
    "ResumeChild",
    "ResumeRun",
    "RunChild",
    "SendMessage",
    "StartRun",
    "Steer",
    "ToolFinished",
    "ToolOutcome",
]

# -- inputs -------------------------------------------------------------------------------------


@quick_init
@dataclass(frozen=True, slots=True)
class StartRun:
    prompt: Content
    run_id: str
    reply: Any = None
    # A host's key for the run (a Ray driver's call), logged in ``turn_start``: a host that
    # restores the agent after a crash tells a run that started already from a new one.
    key: str = ""


@quick_init
@dataclass(frozen=True, slots=True)
class ModelReplied:
    run_id: str
    step: int
    response: ModelResponse | None = None
    error: BaseException | None = None


@quick_init
@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What became of one tool call, ready for the model (built off the actor's thread)."""

    content: Content
    is_error: bool = False
    output: Any = None
    update: ContextUpdate | None = None
    pending: Request | None = None
    retry: bool = False  # the tool raised ModelRetry: counts against its retry budget


@quick_init
@dataclass(frozen=True, slots=True)
class ToolFinished:
    run_id: str
    call_id: str
    outcome: ToolOutcome


@quick_init
@dataclass(frozen=True, slots=True)
class ChildFinished:
    """A child's run ended (or suspended, or failed) for the parent's call ``call_id``."""

    run_id: str
    call_id: str
    child_id: str
    result: RunResult[Any] | None = None
    error: BaseException | None = None
    tree_usage: Usage = field(default_factory=Usage)


@quick_init
@dataclass(frozen=True, slots=True)
class CancelRun:
    reason: str = "cancelled"


@quick_init
@dataclass(frozen=True, slots=True)
class ResumeRun:
    answers: Mapping[str, Answer]
    reply: Any = None


@quick_init
@dataclass(frozen=True, slots=True)
class Steer:
    message: UserMessage


@quick_init
@dataclass(frozen=True, slots=True)
class ApprovalDecided:
    """The host's in-process approval handler answered for call ``call_id``."""

    run_id: str
    call_id: str
    answer: Answer


@quick_init
@dataclass(frozen=True, slots=True)
class PeerMessage:
    """Another agent's message (``ContextUpdate.send``), numbered ``n`` among its sender's."""

    message_id: str
    n: int
    sender: str
    content: str | list[dict[str, Any]]  # as logged: text, or parts' JSON


Input = (
    StartRun
    | ModelReplied
    | ToolFinished
    | ChildFinished
    | CancelRun
    | ResumeRun
    | Steer
    | ApprovalDecided
    | PeerMessage
)

# -- effects ------------------------------------------------------------------------------------


@quick_init
@dataclass(frozen=True, slots=True)
class CallModel:
    """Send a model request; its reply comes back as `ModelReplied` with the same step.

    ``model`` is the model to ask when it is not the agent's own (a compaction's summarizer);
    a negative ``step`` marks a compaction's summary request.
    """

    run_id: str
    step: int
    request: ModelRequest
    timeout: float | None
    model: Any = None


@quick_init
@dataclass(frozen=True, slots=True)
class CallTool:
    run_id: str
    call: ToolCall
    tool: Tool
    arguments: Mapping[str, Any]
    ctx: RunContext[Any]
    timeout: float | None


@quick_init
@dataclass(frozen=True, slots=True)
class RunChild:
    """Start (or, for a kept child, continue) a child agent on a task.

    ``tool_context`` is the child's, worked out by the loop (forwarded or narrowed by the
    subagent's ``tool_context`` function): a host spawning the child hands it this one.
    """

    run_id: str
    call_id: str
    child_id: str
    subagent: Subagent
    task: str
    metadata: Mapping[str, Any]
    timeout: float
    spawn: bool
    tool_context: Any


@quick_init
@dataclass(frozen=True, slots=True)
class ResumeChild:
    run_id: str
    call_id: str
    child_id: str
    answers: Mapping[str, Answer]


@quick_init
@dataclass(frozen=True, slots=True)
class CancelChild:
    child_id: str
    reason: str


@quick_init
@dataclass(frozen=True, slots=True)
class AskApproval:
    """Ask the host's in-process approval handler about a call that needs approval."""

    run_id: str
    call_id: str
    request: Request
    timeout: float | None = None  # the tool's timeout: a handler silent past it denies


@quick_init
@dataclass(frozen=True, slots=True)
class SendMessage:
    """Deliver a logged peer message (its ``message_sent`` event is durable by now)."""

    message_id: str
    n: int
    to: str
    content: str | list[dict[str, Any]]  # as logged: text, or parts' JSON


@quick_init
@dataclass(frozen=True, slots=True)
class Finish:
    """Answer the caller waiting on ``reply`` with a result or an error."""

    reply: Any
    result: RunResult[Any] | None = None
    error: ActorsError | None = None


Effect = (
    CallModel | CallTool | RunChild | ResumeChild | CancelChild | AskApproval | SendMessage | Finish
)
