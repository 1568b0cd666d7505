"""`Agent`, the immutable spec of an agent, and the smaller specs it holds.

An agent names its model, instructions, tools, subagents (`Subagent`: a child the model may
call) and limits (`UsageLimits`), with its validators and history processors.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, cast

from pydantic import TypeAdapter
from typing_extensions import TypeVar

from actors._checks import check_timeout
from actors._text import id_problem
from actors.context._messages import Message
from actors.context._run_context import RunContext
from actors.exceptions import AgentDefinitionError
from actors.loop._budget import Budget
from actors.loop._instructions import Instructions, InstructionsFunction, instructions_function
from actors.loop._output import FINAL_RESULT_TOOL, OutputSchema
from actors.loop._tools import Tool
from actors.loop._toolset import Toolset
from actors.models._model import Model, ModelSettings

if TYPE_CHECKING:
    from actors.loop._compaction import Compaction

__all__ = [
    "PLACEMENTS",
    "Agent",
    "HistoryProcessor",
    "OutputValidator",
    "Placement",
    "Subagent",
    "UsageLimits",
    "validator_name",
]

OutputT = TypeVar("OutputT", default=str)

OutputValidator = Callable[[RunContext[Any], Any], Any]
"""``validator(ctx, output)``: returns the output to use (None keeps it), or raises
`actors.exceptions.ModelRetry` to send the model back; sync or async."""

HistoryProcessor = Callable[[RunContext[Any], list[Message]], list[Message]]
"""``processor(ctx, messages)``: the messages to send the model instead (sync, quick, pure)."""

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
        tool_context: Narrows what the child gets: a function of the parent's tool_context
            (a read-only view when it is a mapping) returning the child's. The child's own
            descendants get what it returns, unless narrowed again. None (the default)
            forwards the parent's unchanged. It runs on the parent's thread each time a child
            is spawned (and again when a session is restored), so keep it a quick selection,
            such as ``lambda deps: {"search": deps["search"]}``. A function that raises
            leaves the child unstarted, and the parent's model gets an error result.
        placement: Where a host that spans processes (`actors.ray.RayRuntime`) starts the
            child: ``"parent"`` on its parent's host, ``"spread"`` on another host; None (the
            default) leaves it to the runtime (``RayRuntime(placement=...)``, ``"parent"``
            unless set). A host of one process (`Runtime`) runs every child with its parent.
    """

    agent: Agent[Any]
    name: str = ""
    description: str = ""
    input_type: type[Any] | None = None
    timeout: float = 300.0
    keep: bool = False
    tool_context: Callable[[Any], Any] | None = None
    placement: Placement | None = None

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
            `actors.models.infer_model` when the spec is made. None: the runtime's
            ``default_model``, else the ``ACTORS_DEFAULT_MODEL`` environment variable; with
            neither, spawning the agent is an error.
        instructions: What the agent is told to do, as an overlay: a string, or a function of
            the model request's `RunContext` (or of nothing) returning a string or None. It is
            evaluated before every model request and appended to the logged system prompt for
            the model, and never logged: a restored session gets the instructions of the code
            that runs now. A function that raises fails the run with `RunFailedError`.
        system_prompt: The logged part: written once, as the leading system message of a
            fresh context, and stored with it; a restored session keeps the one it began with.
        tools: Tools, or plain functions that become tools.
        toolsets: Sources of tools listed at run time, such as MCP servers
            (`actors.mcp.MCPServerStdio`, `actors.mcp.MCPServerHTTP`). Each is opened once per
            runtime, when the agent is spawned, and shared by every agent that uses it.
        subagents: Child agents the model can call, as `Subagent` entries, bare `Agent` specs,
            or a mapping from tool name to either.
        output_type: The type of the final answer (``str`` by default). Other types are
            validated; a failure goes back to the model as a retry.
        max_iterations: Model requests per run before `MaxIterationsExceeded`.
        usage_limits: Caps per run, checked before each request and after each reply.
        budget: What this agent and all its descendants may spend together, across runs
            (inside any budget above it): each request reserves its worst case first, and one
            that does not fit fails its run with `BudgetExceeded`. See the budgets guide.
        tool_timeout: Default seconds per tool call (None: no limit).
        model_timeout: Seconds per model request, retries included (None: no limit).
        model_settings: Settings sent with every request.
        tool_retries: Default retry budget per tool per run (invalid arguments, `ModelRetry`).
        output_retries: How many times per run a final answer may be sent back (it did not
            match the output type, or an output validator raised `ModelRetry`).
        output_validators: Functions of ``(ctx, output)`` that check the final answer, in
            order: each returns the output to use (None keeps it) or raises `ModelRetry` to
            send the model back with a message. Sync ones run on a tool thread, async ones on
            the event loop, under ``tool_timeout``. See the output types guide.
        history_processors: Functions of ``(ctx, messages)`` that return what the model is
            sent instead of the whole transcript (e.g. `keep_last_turns`), applied in order
            before each request. A view for the request only: the transcript and the log keep
            every message. Sync, quick and pure: they run as the request is built.
        description: What a parent's model reads about this agent when it is a subagent.
        on_message: What a peer message (``ContextUpdate.send``) does to an idle agent:
            ``"run"`` (the default) starts a turn on it; ``"queue"`` adds it to the transcript
            for the next run. In a run, it joins that run at its next step boundary either way
            (after the run, if the step in progress was its last).
        context_window: The model's context window in tokens; None takes the model's known
            one (``model.context_window``, or known by its name). Compaction keeps requests
            within it.
        compaction: How the agent keeps its transcript within the window: a `Compaction`
            summarises its oldest messages before a request would pass a share of the window
            (see the compaction guide). None (the default): the whole transcript is sent.
    """

    name: str
    model: Model | str | None = None
    instructions: Instructions | None = None
    system_prompt: str | None = None
    tools: Sequence[Tool | Callable[..., Any]] = ()
    toolsets: Sequence[Toolset] = ()
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
    output_validators: Sequence[OutputValidator] = ()
    history_processors: Sequence[HistoryProcessor] = ()
    on_message: Literal["run", "queue"] = "run"
    context_window: int | None = None
    compaction: Compaction | None = None
    budget: Budget | None = None
    _instructions_fn: InstructionsFunction | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise AgentDefinitionError(f"an agent needs a non-empty name, got {self.name!r}")
        if problem := id_problem(self.name):
            raise AgentDefinitionError(f"agent name {self.name!r} cannot be used: {problem}")
        if self.system_prompt is not None and not isinstance(self.system_prompt, str):
            raise AgentDefinitionError(
                f"agent {self.name!r}: system_prompt must be a string or None, "
                f"got {type(self.system_prompt).__name__}"
            )
        object.__setattr__(
            self, "_instructions_fn", instructions_function(self.name, self.instructions)
        )
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
            check_timeout(value, f"agent {self.name!r}: {label}", AgentDefinitionError)
        lists: dict[str, object] = {"tools": self.tools, "toolsets": self.toolsets}
        for label, entries in lists.items():  # validators and processors are checked below
            if isinstance(entries, str | bytes) or not isinstance(entries, Sequence):
                raise AgentDefinitionError(
                    f"agent {self.name!r}: {label} must be a list, got {type(entries).__name__}"
                )
        model = self.model
        if (
            model is not None
            and not isinstance(model, str)
            and not callable(getattr(model, "request", None))
        ):
            raise AgentDefinitionError(
                f"agent {self.name!r}: model must be a Model (with an async request()) or a "
                f"string such as 'openai:gpt-4o-mini', got {type(model).__name__}"
            )
        if self.on_message not in ("run", "queue"):
            raise AgentDefinitionError(
                f"agent {self.name!r}: on_message must be 'run' or 'queue', got {self.on_message!r}"
            )
        window = self.context_window
        if window is not None and (
            isinstance(window, bool) or not isinstance(window, int) or window < 1
        ):
            raise AgentDefinitionError(
                f"agent {self.name!r}: context_window must be a positive int (tokens) or None, "
                f"got {window!r}"
            )
        if self.compaction is not None:
            from actors.loop._compaction import Compaction

            if not isinstance(self.compaction, Compaction):
                raise AgentDefinitionError(
                    f"agent {self.name!r}: compaction must be a Compaction or None, "
                    f"got {type(self.compaction).__name__}"
                )
        if self.tool_retries < 0 or self.output_retries < 0:
            raise AgentDefinitionError(f"agent {self.name!r}: retry budgets cannot be negative")
        if not isinstance(self.usage_limits, UsageLimits):
            raise AgentDefinitionError(
                f"agent {self.name!r}: usage_limits must be a UsageLimits, "
                f"got {type(self.usage_limits).__name__}"
            )
        if self.budget is not None and not isinstance(self.budget, Budget):
            raise AgentDefinitionError(
                f"agent {self.name!r}: budget must be a Budget or None, "
                f"got {type(self.budget).__name__}"
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
        for entry in self.tools:
            if isinstance(entry, Toolset) and not isinstance(entry, Tool):
                raise AgentDefinitionError(
                    f"agent {self.name!r}: {entry.name!r} is a toolset, not a tool; "
                    "pass it as toolsets=[...]"
                )
        validators = check_validators(self.name, self.output_validators)
        object.__setattr__(self, "output_validators", validators)
        processors = check_processors(self.name, self.history_processors)
        object.__setattr__(self, "history_processors", processors)
        tools = tuple(t if isinstance(t, Tool) else Tool.from_function(t) for t in self.tools)
        object.__setattr__(self, "tools", tools)
        object.__setattr__(self, "toolsets", _normalize_toolsets(self.name, self.toolsets))
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


def _normalize_toolsets(agent: str, toolsets: Sequence[Toolset]) -> tuple[Toolset, ...]:
    if isinstance(toolsets, Toolset) or not isinstance(toolsets, Sequence):
        raise AgentDefinitionError(f"agent {agent!r}: toolsets must be a list of toolsets")
    keys: set[Any] = set()
    for toolset in toolsets:
        if not isinstance(toolset, Toolset):
            raise AgentDefinitionError(
                f"agent {agent!r}: {toolset!r} is not a toolset (e.g. actors.mcp.MCPServerStdio)"
            )
        if toolset.key in keys:
            raise AgentDefinitionError(f"agent {agent!r}: toolset {toolset.name!r} is given twice")
        keys.add(toolset.key)
    return tuple(toolsets)


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
                entry = dataclasses.replace(entry, name=name)
        else:
            raise AgentDefinitionError(
                f"agent {parent!r}: a subagent must be an Agent or a Subagent, got {entry!r}"
            )
        if entry.timeout <= 0:
            raise AgentDefinitionError(f"agent {parent!r}: subagent timeouts must be positive")
        if entry.placement is not None and entry.placement not in PLACEMENTS:
            raise AgentDefinitionError(
                f"agent {parent!r}: subagent {entry.tool_name!r} has placement "
                f"{entry.placement!r}; use one of {list(PLACEMENTS)}"
            )
        if entry.tool_context is not None and not callable(entry.tool_context):
            raise AgentDefinitionError(
                f"agent {parent!r}: subagent {entry.tool_name!r} takes tool_context=a function "
                "of the parent's tool_context returning the child's, got "
                f"{type(entry.tool_context).__name__}"
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


def check_validators(agent: str, validators: Any) -> tuple[OutputValidator, ...]:
    """The validators as a tuple; each must take (ctx, output)."""
    functions = _functions(agent, "output_validators", validators)
    for validator in functions:
        _takes_two(agent, "output validator", validator, "(ctx, output)")
    return functions


def validator_name(validator: Any) -> str:
    """How logs and errors name an output validator."""
    return str(getattr(validator, "__name__", None) or type(validator).__name__)


def check_processors(agent: str, processors: Any) -> tuple[HistoryProcessor, ...]:
    """The history processors as a tuple; each must be a sync function of (ctx, messages)."""
    functions = _functions(agent, "history_processors", processors)
    for processor in functions:
        name = validator_name(processor)
        if inspect.iscoroutinefunction(processor):
            raise AgentDefinitionError(
                f"agent {agent!r}: history processor {name!r} is async; processors run as a "
                "request is built and must not wait. Summarise in a tool or between runs, keep "
                "the summary in the metadata, and let a sync processor put it in"
            )
        _takes_two(agent, "history processor", processor, "(ctx, messages)")
    return functions


def _functions(agent: str, label: str, functions: Any) -> tuple[Any, ...]:
    problem = AgentDefinitionError(
        f"agent {agent!r}: {label} is a list of functions, got {functions!r}"
    )
    if callable(functions) or isinstance(functions, str | bytes):
        raise problem
    try:
        out = tuple(functions)
    except TypeError:
        raise problem from None
    for function in out:
        if not callable(function):
            raise AgentDefinitionError(
                f"agent {agent!r}: {label} holds {function!r}, which is not a function"
            )
    return out


def _takes_two(agent: str, label: str, function: Any, shape: str) -> None:
    try:
        inspect.signature(function).bind(None, None)
    except TypeError:
        raise AgentDefinitionError(
            f"agent {agent!r}: {label} {validator_name(function)!r} must take two positional "
            f"arguments, {shape}"
        ) from None
    except ValueError:  # no signature to read (some builtins): trust it
        pass
