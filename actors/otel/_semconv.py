"""The names spans carry: OpenTelemetry GenAI semantic conventions, and ours under ``actors.``.

Written out here rather than imported from ``opentelemetry-semantic-conventions``: the GenAI
names are still in development there and move between releases, and the extra depends on the
API alone.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "ACTORS_PARENT_ID",
    "ACTORS_RUN_CONTINUED",
    "ACTORS_RUN_ID",
    "ACTORS_RUN_OUTCOME",
    "ACTORS_SUBAGENT_ID",
    "ACTORS_SUBAGENT_NAME",
    "ACTORS_SUBAGENT_STATUS",
    "AGENT_ID",
    "AGENT_NAME",
    "CONVERSATION_ID",
    "ERROR_TYPE",
    "INPUT_MESSAGES",
    "OPERATION",
    "OUTPUT_MESSAGES",
    "PROVIDER",
    "REQUEST_MODEL",
    "RESPONSE_FINISH_REASONS",
    "RESPONSE_MODEL",
    "SETTINGS",
    "SYSTEM_INSTRUCTIONS",
    "TOOL_ARGUMENTS",
    "TOOL_CALL_ID",
    "TOOL_NAME",
    "TOOL_RESULT",
    "TOOL_TYPE",
    "USAGE_CACHE_READ",
    "USAGE_CACHE_WRITE",
    "USAGE_INPUT",
    "USAGE_OUTPUT",
    "model_and_provider",
    "tool_error_type",
    "usage_attributes",
]

OPERATION: Final = "gen_ai.operation.name"
PROVIDER: Final = "gen_ai.provider.name"
AGENT_NAME: Final = "gen_ai.agent.name"
AGENT_ID: Final = "gen_ai.agent.id"
CONVERSATION_ID: Final = "gen_ai.conversation.id"
REQUEST_MODEL: Final = "gen_ai.request.model"
RESPONSE_MODEL: Final = "gen_ai.response.model"
RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
USAGE_INPUT: Final = "gen_ai.usage.input_tokens"
USAGE_OUTPUT: Final = "gen_ai.usage.output_tokens"
USAGE_CACHE_READ: Final = "gen_ai.usage.cache_read.input_tokens"
USAGE_CACHE_WRITE: Final = "gen_ai.usage.cache_creation.input_tokens"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_TYPE: Final = "gen_ai.tool.type"
TOOL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
TOOL_RESULT: Final = "gen_ai.tool.call.result"
INPUT_MESSAGES: Final = "gen_ai.input.messages"
OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
ERROR_TYPE: Final = "error.type"

SETTINGS: Final = {
    "temperature": "gen_ai.request.temperature",
    "max_tokens": "gen_ai.request.max_tokens",
    "top_p": "gen_ai.request.top_p",
    "seed": "gen_ai.request.seed",
    "stop": "gen_ai.request.stop_sequences",
}
"""Model settings the conventions name, by our `ModelSettings` key."""

ACTORS_RUN_ID: Final = "actors.run.id"
ACTORS_RUN_OUTCOME: Final = "actors.run.outcome"
ACTORS_RUN_CONTINUED: Final = "actors.run.continued"
ACTORS_PARENT_ID: Final = "actors.agent.parent_id"
ACTORS_SUBAGENT_ID: Final = "actors.subagent.id"
ACTORS_SUBAGENT_NAME: Final = "actors.subagent.name"
ACTORS_SUBAGENT_STATUS: Final = "actors.subagent.status"

# Providers whose label in a model's name (``"openai:gpt-4o"``) differs from the well-known value.
_PROVIDERS: Final = {"google": "gcp.gemini", "gemini": "gcp.gemini", "mistral": "mistral_ai"}

_EXCEPTION_NAME = re.compile(r"^([A-Za-z_][\w.]*)(?::|$)")


def model_and_provider(name: str) -> tuple[str, str | None]:
    """Split a model's name (``"openai:gpt-4o-mini"``) into the model and its provider.

    A name without a provider label (a test model's ``"scripted"``) has no known provider.
    """
    label, sep, model = name.partition(":")
    if not sep or not label or not model:
        return name, None
    return model, _PROVIDERS.get(label, label)


def tool_error_type(content: str) -> str:
    """A low-cardinality ``error.type`` for a tool's error result.

    A tool that raised reads ``"ValueError: ..."`` (its exception's class), a timeout
    ``"timeout"``, a cancelled call ``"cancelled"``; anything else is ``"_OTHER"``.
    """
    if content.startswith("Tool timed out"):
        return "timeout"
    if content.startswith("Tool was cancelled"):
        return "cancelled"
    match = _EXCEPTION_NAME.match(content)
    return match.group(1) if match else "_OTHER"


def usage_attributes(counts: list[int]) -> dict[str, int]:
    """The usage attributes of ``[input, output, cache read, cache write]`` tokens.

    Input and output are always set; the cache counts only when a provider reported them.
    """
    attributes = {USAGE_INPUT: counts[0], USAGE_OUTPUT: counts[1]}
    if counts[2]:
        attributes[USAGE_CACHE_READ] = counts[2]
    if counts[3]:
        attributes[USAGE_CACHE_WRITE] = counts[3]
    return attributes
