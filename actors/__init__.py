"""actors: LLM agent systems in which every agent and subagent is an actor owning its context."""

from actors._agent import Agent, Subagent, UsageLimits
from actors._agent_context import AgentContext, TranscriptEntry
from actors._cancel import CancellationToken
from actors._events import Event
from actors._loop import TreeLimits
from actors._messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from actors._model import (
    InlineModel,
    Model,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    StreamDelta,
    ToolDefinition,
)
from actors._ref import AgentRef, RunFuture, TreeNode
from actors._result import RunResult
from actors._run_context import Delegator, RunContext
from actors._run_sync import run_sync
from actors._runtime import Runtime
from actors._suspension import Answer, Pending, Request
from actors._tools import Tool, ToolResult, tool
from actors._update import ContextUpdate, LoggedEvent
from actors._usage import Usage

__all__ = [
    "Agent",
    "AgentContext",
    "AgentRef",
    "Answer",
    "AssistantMessage",
    "CancellationToken",
    "ContextUpdate",
    "Delegator",
    "Event",
    "InlineModel",
    "LoggedEvent",
    "Message",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "Pending",
    "Request",
    "run_sync",
    "RunContext",
    "RunFuture",
    "RunResult",
    "Runtime",
    "StreamDelta",
    "Subagent",
    "SystemMessage",
    "tool",
    "Tool",
    "ToolCall",
    "ToolDefinition",
    "ToolResult",
    "ToolResultMessage",
    "TranscriptEntry",
    "TreeLimits",
    "TreeNode",
    "Usage",
    "UsageLimits",
    "UserMessage",
]

__version__ = "0.1.0"
