from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, cast

from pydantic import TypeAdapter
from typing_extensions import TypeVar

from actors.exceptions import AgentDefinitionError
from actors.loop._output import FINAL_RESULT_TOOL, OutputSchema
from actors.loop._tools import Tool
from actors.models._model import Model, ModelSettings

__all__ = ["PLACEMENTS", "Agent", "Placement", "Subagent", "UsageLimits"]

OutputT = TypeVar("OutputT", default=str)

Placement = Literal["parent", "spread"]
"""Where a child is started by a host that spans processes: with its parent, or elsewhere."""

PLACEMENTS: tuple[Placement, ...] = ("parent", "spread")


@dataclass(frozen=True, slots=True)
class UsageLimits:
    """Caps on what one run may consume; None means no cap.

    Attributes:
        requests: Model requests per run.
        tool_calls: Tool calls per run.
        input_tokens: Input tokens per run.
        output_tokens: Output tokens per run.
        total_tokens: Input plus output tokens per run.
    """

    requests: int | None = None
    tool_calls: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Subagent:
    """A named child agent that a parent's model can call like a tool.

    Attributes:
        agent: The child's spec.
        name: The tool name the parent's model calls it by; the child spec's name by default.
        description: What the parent's model reads about it.
        input_type: A pydantic model for structured input besides the task text, or None.
        timeout: Seconds the child's run may take before it is cancelled (default 300).
        keep: Keep the child alive after its run, so later calls continue the same child
            context instead of starting a fresh one.
        placement: Where a host that spans processes (`actors.ray.RayRuntime`) starts the
            child: ``"parent"`` (default) on its parent's host, ``"spread"`` on another host.
            A host of one process (`Runtime`) runs every child with its parent.
    """

    agent: Agent[Any]
    name: str = ""
    description: str = ""
    input_type: type[Any] | None = None
    timeout: float = 300.0
    keep: bool = False
    placement: Placement = "parent"

    @property
    def tool_name(self) -> str:
        """The name the parent's model calls the child by."""
        return self.name or self.agent.name


@dataclass(frozen=True)
class Agent(Generic[OutputT]):
    """An immutable agent spec: configuration, never state.

    One spec can back many agent actors at once; each actor owns its own context.

    Attributes:
        name: The agent's name (also how specs are matched on restore).
        model: A `Model`, or a string such as ``"openai:gpt-4o-mini"`` resolved by
            `actors.models.infer_model` when the agent is spawned.
        instructions: The system prompt, logged as the first message of a fresh context.
        tools: Tools, or plain functions that become tools.
        subagents: Child agents the model can call, as `Subagent` entries, bare `Agent` specs,
            or a mapping from tool name to either.
        output_type: The type of the final answer (``str`` by default). Other types are
            validated; a failure goes back to the model as a retry.
        max_iterations: Model requests per run before `MaxIterationsExceeded`.
        usage_limits: Caps per run, checked before each request and after each reply.
        tool_timeout: Default seconds per tool call (None: no limit).
        model_timeout: Seconds per model request, retries included (None: no limit).
        model_settings: Settings sent with every request.
        tool_retries: Default validation retry budget per tool per run.
        output_retries: How many invalid final answers the model may correct per run.
        description: What a parent's model reads about this agent when it is a subagent.
    """

    name: str
    model: Model | str | None = None
    instructions: str | None = None
    tools: Sequence[Tool | Callable[..., Any]] = ()
    subagents: Sequence[Subagent | Agent[Any]] | Mapping[str, Subagent | Agent[Any]] = ()
    output_type: type[OutputT] | None = None
    max_iterations: int = 25
    usage_limits: UsageLimits = field(default_factory=UsageLimits)
    tool_timeout: float | None = 60.0
    model_timeout: float | None = 600.0
    model_settings: ModelSettings = field(default_factory=lambda: ModelSettings())
    tool_retries: int = 1
    output_retries: int = 1
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise AgentDefinitionError(f"an agent needs a non-empty name, got {self.name!r}")
        if (
            not isinstance(self.max_iterations, int)
            or isinstance(self.max_iterations, bool)
            or self.max_iterations < 1
        ):
            raise AgentDefinitionError(
                f"agent {self.name!r}: max_iterations must be a positive int, "
                f"got {self.max_iterations!r}"
            )
        for label, value in (
            ("tool_timeout", self.tool_timeout),
            ("model_timeout", self.model_timeout),
        ):
            if value is not None and value <= 0:
                raise AgentDefinitionError(f"agent {self.name!r}: {label} must be positive or None")
        if self.tool_retries < 0 or self.output_retries < 0:
            raise AgentDefinitionError(f"agent {self.name!r}: retry budgets cannot be negative")
        if not isinstance(self.usage_limits, UsageLimits):
            raise AgentDefinitionError(
                f"agent {self.name!r}: usage_limits must be a UsageLimits, "
                f"got {type(self.usage_limits).__name__}"
            )
        structured = self.output_type is not None and self.output_type is not str
        if structured:
            try:
                OutputSchema(cast(type[Any], self.output_type))
            except Exception as exc:  # pydantic's schema errors have many types
                raise AgentDefinitionError(
                    f"agent {self.name!r}: output_type {self.output_type!r} cannot be "
                    f"validated or described as JSON: {exc}"
                ) from exc
        tools = tuple(t if isinstance(t, Tool) else Tool.from_function(t) for t in self.tools)
        object.__setattr__(self, "tools", tools)
        subagents = _normalize_subagents(self.name, self.subagents)
        object.__setattr__(self, "subagents", subagents)
        names = [t.name for t in tools] + [s.tool_name for s in subagents]
        if structured and FINAL_RESULT_TOOL in names:
            raise AgentDefinitionError(
                f"agent {self.name!r}: {FINAL_RESULT_TOOL!r} is the tool that gives a structured "
                "answer; rename the tool or subagent of that name"
            )
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise AgentDefinitionError(
                f"agent {self.name!r}: tool and subagent names must be unique, "
                f"{duplicates} appear more than once"
            )
        if isinstance(self.model, str):
            from actors.models import infer_model

            object.__setattr__(self, "model", infer_model(self.model))

    @property
    def tool_map(self) -> dict[str, Tool]:
        """The tools by name."""
        return {t.name: t for t in cast(tuple[Tool, ...], self.tools)}

    @property
    def subagent_map(self) -> dict[str, Subagent]:
        """The subagents by tool name."""
        return {s.tool_name: s for s in cast(tuple[Subagent, ...], self.subagents)}

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other


def _normalize_subagents(
    parent: str,
    subagents: Sequence[Subagent | Agent[Any]] | Mapping[str, Subagent | Agent[Any]],
) -> tuple[Subagent, ...]:
    items: list[tuple[str, Subagent | Agent[Any]]]
    if isinstance(subagents, Mapping):
        items = list(subagents.items())
    else:
        items = [("", entry) for entry in subagents]
    out: list[Subagent] = []
    for name, entry in items:
        if isinstance(entry, Agent):
            entry = Subagent(entry, name=name)
        elif isinstance(entry, Subagent):
            if name and entry.name != name:
                entry = Subagent(
                    entry.agent,
                    name,
                    entry.description,
                    entry.input_type,
                    entry.timeout,
                    entry.keep,
                    entry.placement,
                )
        else:
            raise AgentDefinitionError(
                f"agent {parent!r}: a subagent must be an Agent or a Subagent, got {entry!r}"
            )
        if entry.timeout <= 0:
            raise AgentDefinitionError(f"agent {parent!r}: subagent timeouts must be positive")
        if entry.placement not in PLACEMENTS:
            raise AgentDefinitionError(
                f"agent {parent!r}: subagent {entry.tool_name!r} has placement "
                f"{entry.placement!r}; use one of {list(PLACEMENTS)}"
            )
        if entry.input_type is not None:
            try:
                TypeAdapter(entry.input_type).json_schema()
            except Exception as exc:  # pydantic's schema errors have many types
                raise AgentDefinitionError(
                    f"agent {parent!r}: subagent {entry.tool_name!r} has an input_type "
                    f"{entry.input_type!r} that cannot be described as JSON: {exc}"
                ) from exc
        out.append(entry)
    return tuple(out)
