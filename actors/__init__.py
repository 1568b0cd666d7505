"""actors: LLM agent systems in which every agent and subagent is an actor owning its context."""

from actors._agent_context import AgentContext, TranscriptEntry
from actors._cancel import CancellationToken
from actors._events import Event
from actors._messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from actors._run_context import RunContext
from actors._suspension import Answer, Pending, Request
from actors._update import ContextUpdate
from actors._usage import Usage

__all__ = [
    "AgentContext",
    "Answer",
    "AssistantMessage",
    "CancellationToken",
    "ContextUpdate",
    "Event",
    "Message",
    "Pending",
    "Request",
    "RunContext",
    "SystemMessage",
    "ToolCall",
    "ToolResultMessage",
    "TranscriptEntry",
    "Usage",
    "UserMessage",
]

__version__ = "0.1.0"
