"""actors: LLM agent systems in which every agent and subagent is an actor owning its context."""

from actors._logging import configure_logging
from actors.context._agent_context import AgentContext, TranscriptEntry
from actors.context._cancel import CancellationToken
from actors.context._events import Event
from actors.context._messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from actors.context._parts import (
    AudioPart,
    BinaryPart,
    Content,
    DocumentPart,
    ImagePart,
    InvalidContentError,
    Part,
    TextPart,
    describe_content,
    file_part,
)
from actors.context._result import RunResult
from actors.context._run_context import Delegator, RunContext
from actors.context._suspension import Answer, Pending, Request
from actors.context._update import ContextUpdate, LoggedEvent, PeerSend
from actors.context._usage import Usage
from actors.host._face import HostFace, SessionHost
from actors.host._ref import AgentRef, RunFuture
from actors.host._stream import (
    RunEnded,
    StreamEvent,
    SubagentFinished,
    SubagentSpawned,
    Suspended,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from actors.host._tombstone import TreeNode
from actors.loop._agent import Agent, HistoryProcessor, OutputValidator, Subagent, UsageLimits
from actors.loop._budget import Budget
from actors.loop._compaction import Compaction
from actors.loop._history import keep_last_turns
from actors.loop._loop import TreeLimits
from actors.loop._tools import Tool, ToolResult, tool
from actors.loop._toolset import Toolset, ToolsetView
from actors.models._model import (
    InlineModel,
    Model,
    ModelFallback,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    StreamDelta,
    ToolDefinition,
)
from actors.models._prices import Price
from actors.models._tokens import count_tokens
from actors.runtime._run_sync import run_sync
from actors.runtime._runtime import Runtime

__all__ = [
    "Agent",
    "AgentContext",
    "AgentRef",
    "Answer",
    "AssistantMessage",
    "AudioPart",
    "BinaryPart",
    "Budget",
    "CancellationToken",
    "Compaction",
    "configure_logging",
    "Content",
    "ContextUpdate",
    "count_tokens",
    "Delegator",
    "describe_content",
    "DocumentPart",
    "Event",
    "file_part",
    "HistoryProcessor",
    "HostFace",
    "ImagePart",
    "InlineModel",
    "InvalidContentError",
    "keep_last_turns",
    "LoggedEvent",
    "Message",
    "Model",
    "ModelFallback",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "OutputValidator",
    "Part",
    "PeerSend",
    "Pending",
    "Price",
    "Request",
    "run_sync",
    "RunContext",
    "RunEnded",
    "RunFuture",
    "RunResult",
    "Runtime",
    "SessionHost",
    "StreamDelta",
    "StreamEvent",
    "Subagent",
    "SubagentFinished",
    "SubagentSpawned",
    "Suspended",
    "SystemMessage",
    "TextDelta",
    "TextPart",
    "tool",
    "Tool",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolDefinition",
    "ToolResult",
    "ToolResultMessage",
    "Toolset",
    "ToolsetView",
    "TranscriptEntry",
    "TreeLimits",
    "TreeNode",
    "Usage",
    "UsageLimits",
    "UserMessage",
]

__version__ = "0.1.0"
