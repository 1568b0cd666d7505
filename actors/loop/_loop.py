"""The agent loop: one agent's state machine, written once, independent of any runtime.

It takes inputs (`StartRun`, `ModelReplied`, `ToolFinished`, ...) and returns effects (`CallModel`,
`CallTool`, `RunChild`, `Finish`, ...). A host carries the effects out and feeds their
completions back as inputs: the pykka actor does it with threads and an asyncio loop, the
synchronous driver of `actors.testing` does it inline. The loop never blocks and never does I/O.

`AgentLoop` is assembled along the loop's seams: its state and limits live in `_loop_state`,
children (subagent calls and delegations) in `_loop_children`, suspension (parked calls,
answers, approvals) in `_loop_suspension`; runs, model steps, tool calls and endings are here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal, cast

from pydantic import ValidationError

from actors._safe import exception_message, exception_text
from actors.context._agent_context import AgentContext
from actors.context._cancel import CancellationToken
from actors.context._json import json_copy
from actors.context._messages import (
    Message,
    SystemMessage,
    ToolCall,
    UserMessage,
    tool_result,
    user_message,
)
from actors.context._parts import Content, content_json, content_text
from actors.context._read_only import read_only
from actors.context._result import RunResult
from actors.context._run_context import RunContext
from actors.context._suspension import Answer, Request
from actors.context._update import ContextUpdate
from actors.context._usage import Usage, usage_of
from actors.exceptions import (
    ActorsError,
    BudgetExceeded,
    InvalidUpdateError,
    MaxIterationsExceeded,
    ModelFallbackError,
    OutputValidationError,
    RunError,
    RunFailedError,
    ToolRetriesExceeded,
    UsageLimitExceeded,
    UserError,
)
from actors.loop._agent import Agent, UsageLimits
from actors.loop._answer import AnswerMixin
from actors.loop._budget import Ledger
from actors.loop._children import ChildrenMixin
from actors.loop._compacting import CompactionMixin
from actors.loop._compactor import Compactor
from actors.loop._history import apply_history_processors
from actors.loop._output import FINAL_RESULT_TOOL, OutputSchema
from actors.loop._peers import PeerDirectory, PeersMixin, sends_of
from actors.loop._reservation import BudgetGate
from actors.loop._sequential import SequentialMixin, clashing_sets, warn_clashing_sets
from actors.loop._state import (
    _NO_USAGE,
    INTERRUPTED,
    INVALID_ARGUMENTS_KEY,
    NOT_EXECUTED,
    LoopStatus,
    TreeLimits,
    _Call,
    _Run,
)
from actors.loop._subagent_calls import subagent_definition, validate_task
from actors.loop._suspension import SuspensionMixin
from actors.loop._tools import Tool, describe_validation_error
from actors.loop._toolset import ToolsetView, merge_tools
from actors.loop._toolset_host import ToolsetHost
from actors.loop._types import (
    ApprovalDecided,
    AskApproval,
    CallModel,
    CallTool,
    CancelChild,
    CancelRun,
    ChildFinished,
    Effect,
    Finish,
    Input,
    ModelReplied,
    PeerMessage,
    ResumeRun,
    StartRun,
    Steer,
    ToolFinished,
    ToolOutcome,
)
from actors.loop._validation import validator_tool
from actors.models._model import Model, ModelFallback, ModelRequest, ToolDefinition

__all__ = ["AgentLoop", "LoopStatus", "TreeLimits"]

_NO_TOOL_CONTEXT: Mapping[str, Any] = MappingProxyType({})

_NO_LIMITS = UsageLimits()


class AgentLoop(
    AnswerMixin, SuspensionMixin, ChildrenMixin, SequentialMixin, PeersMixin, CompactionMixin
):
    """The state machine of one agent; it owns the agent's `AgentContext`.

    Args:
        spec: The agent's spec.
        context: The context it owns (fresh, or restored from a log).
        model: The resolved model.
        tool_context: The static channel handed to every tool and child.
        depth: How deep below the root this agent is.
        limits: The tree limits.
        approval_handler: Whether the host decides approvals in process.
        toolsets: The host's toolset views, for an agent with ``toolsets``: their tools are
            read (never waited for) at each step.
        peer_exists: Whether the host knows an agent of an id (peer messages go only to
            agents it knows); None refuses every peer message.
        budget: The ledger of the agent's budget (its tree's, or its own), or None.
    """

    def __init__(
        self,
        spec: Agent[Any],
        context: AgentContext,
        *,
        model: Model,
        tool_context: Any = None,
        depth: int = 0,
        limits: TreeLimits | None = None,
        approval_handler: bool = False,
        toolsets: ToolsetHost | None = None,
        peer_exists: PeerDirectory | None = None,
        budget: Ledger | None = None,
    ) -> None:
        self.spec = spec
        self._budget = BudgetGate(budget, context) if budget is not None else None
        # What each request is sent with: a budget may add the max_tokens its worst case needs.
        self._settings = (
            self._budget.settings(spec.model_settings) if self._budget else spec.model_settings
        )
        self.approval_handler = approval_handler
        self.peer_exists = peer_exists
        self._outbox = []
        self.ctx = context
        self.model = model
        self.tool_context = tool_context
        # What tools, instructions and narrowing functions see: a mapping as a read-only view.
        self.tool_view = read_only(tool_context)
        self.depth = depth
        self.limits = limits or TreeLimits()
        self._counts_usage = spec.usage_limits != _NO_LIMITS
        self._static_tools = spec.tool_map
        self._tools = self._static_tools
        self._subagents = spec.subagent_map
        if spec.toolsets and toolsets is None:
            raise UserError(
                f"agent {spec.name!r} has toolsets, and its host gave it none: run it in a "
                "Runtime or a SyncDriver"
            )
        self._views: tuple[tuple[str, ToolsetView], ...] = tuple(
            (t.name, toolsets.view(t)) for t in spec.toolsets if toolsets is not None
        )
        self._listed: tuple[tuple[Tool, ...], ...] | None = None
        self._output = (
            OutputSchema(spec.output_type)
            if spec.output_type is not None and spec.output_type is not str
            else None
        )
        self._use_output_tool = self._output is not None and bool(
            self._tools or self._subagents or self._views
        )
        self._validators = tuple(validator_tool(v) for v in spec.output_validators)
        self._text_schema = (
            self._output.json_schema if self._output and not self._use_output_tool else None
        )
        self._output_note = ""
        if self._output is not None and not self._use_output_tool:
            # Without a final-result tool the schema would otherwise never reach the model.
            schema = json.dumps(self._output.json_schema, separators=(",", ":"))
            self._output_note = (
                f"Give your final answer as JSON only, matching this JSON schema: {schema}"
            )
        self._instructions_fn = spec._instructions_fn
        self._static_overlay = (
            None
            if self._instructions_fn is not None
            else _joined(cast("str | None", spec.instructions), self._output_note)
        )
        self._definitions: tuple[ToolDefinition, ...] = ()
        self._refresh_tools()
        self._run: _Run | None = None
        # What a restored log says of the runs and children so far (folded by the context:
        # no event is read, so a context activated from a snapshot reads none).
        self._children_spawned = context._children_spawned
        self._runs = context._turns
        self._kept: dict[str, str] = dict(context._kept_names)
        self.current_tool: str | None = None
        if spec.compaction:  # without, the class's None: one check a step, no memory
            self._compactor = Compactor(spec, model, context)
        if context.suspended:
            self._restore_suspension()

    def _refresh_tools(self) -> None:
        """Take the toolsets' current tools (a cached read, never a wait) if they changed."""
        if not self._views and self._listed is not None:
            return  # no toolsets: the tools never change
        listed = tuple(view.tools_nowait() for _, view in self._views)
        if self._listed is not None and all(
            a is b for a, b in zip(listed, self._listed, strict=True)
        ):
            return
        self._listed = listed
        if self._views:
            self._tools = merge_tools(
                self._static_tools,
                [(name, tools) for (name, _), tools in zip(self._views, listed, strict=True)],
                [*self._subagents, *([FINAL_RESULT_TOOL] if self._use_output_tool else [])],
            )
        self._definitions = tuple(
            [t.definition for t in self._tools.values()]
            + [subagent_definition(s) for s in self._subagents.values()]
            + ([self._output.tool] if self._output and self._use_output_tool else [])
        )

    # -- public state -------------------------------------------------------------------------

    @property
    def status(self) -> LoopStatus:
        """``idle``, ``running`` (a model call or tool in flight) or ``suspended``."""
        run = self._run
        if run is None:
            return "idle"
        if run.awaiting_model or run.validation is not None:
            return "running"
        for call in run.calls.values():  # a loop, not any(): hosts ask after every input
            if call.state == "running":
                return "running"
        return "suspended"

    @property
    def run_id(self) -> str | None:
        """The id of the run in progress (running or suspended), or None."""
        return self._run.run_id if self._run else None

    def next_run_id(self) -> str:
        """A deterministic id for the next run of this agent."""
        return f"{self.ctx.agent_id}-run-{self._runs + 1}"

    @property
    def budgeted(self) -> bool:
        """Whether the agent's requests reserve on a budget (their reservations are logged)."""
        return self._budget is not None

    def unsent(self, effect: CallModel) -> None:
        """The host will not send ``effect`` (it ends the run instead): release its reservation."""
        if self._budget is not None:
            settled = self._budget.settle(ModelReplied(effect.run_id, effect.step))
            self._budget.log_settled(settled, effect.run_id, effect.step)

    def fail_now(self, error: RunError) -> list[Effect]:
        """End the run in progress with ``error`` (used by a host that hit a fault)."""
        return self._fail(error, reason="error")

    def token_cancel(self, reason: str) -> None:
        """Set the run's cancellation token (the host is going away)."""
        if self._run is not None:
            self._run.token.cancel(reason)

    # -- the one entry point -----------------------------------------------------------------

    def handle(self, message: Input) -> list[Effect]:
        """Take one input and return the effects the host must carry out, in order.

        Peer messages the step's tools sent come first: the host delivers them once the step
        is written, before it starts anything else.
        """
        handler = _HANDLERS.get(type(message))
        if handler is None:  # a subclass of an input: the first class it is an instance of
            handler = next((h for t, h in _HANDLERS.items() if isinstance(message, t)), None)
            if handler is None:
                raise TypeError(f"unknown input {message!r}")
        effects = handler(self, message)
        if self._outbox:
            effects = [*self._outbox, *effects]
            self._outbox.clear()
        return effects

    # -- starting ----------------------------------------------------------------------------

    def _start(self, message: StartRun) -> list[Effect]:
        if self._run is not None:
            error = UserError(
                f"agent {self.ctx.agent_id!r} is {self.status} with run {self._run.run_id!r}; "
                "wait for it to finish, resume or cancel it, or use send() to steer it"
            )
            return [Finish(message.reply, error=error)]
        if not isinstance(message.prompt, str | tuple):
            error = UserError("a run's prompt must be a str or a sequence of parts")
            return [Finish(message.reply, error=error)]
        data = {"key": message.key} if message.key else None
        return self._open_run(message.run_id, message.reply, data, prompt=message.prompt)

    def _open_run(
        self,
        run_id: str | None,
        reply: Any,
        data: dict[str, Any] | None = None,
        *,
        prompt: Content | None = None,
    ) -> list[Effect]:
        """Start a run: on a prompt, or (``prompt`` None) on what the transcript already holds."""
        run_id = run_id or self.next_run_id()
        self._runs += 1
        ctx = self.ctx
        self._run = _Run(
            run_id=run_id,
            reply=reply,
            token=CancellationToken(),
            start_usage=ctx.usage,
            start_seq=ctx.event_count,
        )
        ctx._record("turn_start", {"run_id": run_id, **data} if data else {"run_id": run_id})
        if prompt is not None:
            self._introduce()
            ctx._add_message(user_message(prompt))
        return self._next_step()

    def _introduce(self) -> None:
        """A fresh transcript starts with the logged system prompt."""
        if self.ctx.last_message is None and self.spec.system_prompt:
            self.ctx._add_message(SystemMessage(content=self.spec.system_prompt))

    def _overlay(self) -> str | RunFailedError | None:
        """The instructions function's text for the next request (with the JSON-text note)."""
        function = self._instructions_fn
        assert function is not None
        ctx = self.ctx
        run_ctx = self._request_context()
        try:
            text = function(run_ctx)
        except Exception as exc:  # the user's function: its failure ends the run, typed
            error = RunFailedError(
                f"agent {ctx.agent_id!r}: its instructions function failed: {exception_text(exc)}"
            )
            error.__cause__ = exc
            return error
        if text is not None and not isinstance(text, str):
            return RunFailedError(
                f"agent {ctx.agent_id!r}: its instructions function returned a "
                f"{type(text).__name__}; it must return a string or None"
            )
        return _joined(text, self._output_note)

    # -- model steps --------------------------------------------------------------------------

    def _run_usage(self) -> Usage:
        assert self._run is not None
        now, start = self.ctx.usage, self._run.start_usage
        usage = usage_of(
            now.requests - start.requests,
            now.input_tokens - start.input_tokens,
            now.output_tokens - start.output_tokens,
            now.tool_calls - start.tool_calls,
            None,
            now.cache_read_tokens - start.cache_read_tokens,
            now.cache_write_tokens - start.cache_write_tokens,
        )
        if self._budget is not None:  # what its requests cost, as the budget priced them
            return self._budget.priced(usage, self._run.run_id)
        return usage

    def _usage_problem(self, *, before_request: bool = False, new_calls: int = 0) -> str | None:
        if not self._counts_usage:
            return None  # the common case: nothing to count against (a hot path)
        limits = self.spec.usage_limits
        used = self._run_usage()
        checks = [
            ("requests", used.requests + (1 if before_request else 0), limits.requests),
            ("tool_calls", used.tool_calls + new_calls, limits.tool_calls),
            ("input_tokens", used.input_tokens, limits.input_tokens),
            ("output_tokens", used.output_tokens, limits.output_tokens),
            ("total_tokens", used.total_tokens, limits.total_tokens),
        ]
        for name, value, limit in checks:
            if limit is not None and value > limit:
                return f"usage limit {name}={limit} exceeded ({value})"
        return None

    def _next_step(self) -> list[Effect]:
        run = self._run
        assert run is not None
        ctx = self.ctx
        if run.final is not None:
            return self._complete(run.final[0])
        if run.steering:
            self._flush_steering(run)
        iteration = ctx.iteration
        if iteration >= ctx.max_iterations:
            return self._fail(
                MaxIterationsExceeded(
                    f"agent {ctx.agent_id!r} made {iteration} model requests in this run "
                    f"(max_iterations={ctx.max_iterations}); raise max_iterations or check the "
                    "model is not looping"
                ),
                reason="limit",
            )
        if self._counts_usage and (problem := self._usage_problem(before_request=True)):
            return self._fail(UsageLimitExceeded(f"agent {ctx.agent_id!r}: {problem}"), "limit")
        if self._instructions_fn is None:
            if ctx.system_prompt_overlay != self._static_overlay:
                ctx.put_system_prompt_overlay(self._static_overlay)
        else:
            overlay = self._overlay()
            if isinstance(overlay, RunFailedError):
                return self._fail(overlay, reason="error")
            ctx.put_system_prompt_overlay(overlay)
        if self._views:
            self._refresh_tools()  # a toolset's list may have changed since the last step
        messages: Sequence[Message] = ctx.model_messages()
        if self.spec.history_processors:
            try:
                messages = self._processed(messages)
            except RunFailedError as failure:
                return self._fail(failure, reason="error")
        request = ModelRequest(
            messages=messages,
            tools=self._definitions,
            settings=self._settings,
            cancellation=run.token,
            agent_id=ctx.agent_id,
            output_schema=self._text_schema,
        )
        if self._compactor is not None and (compacting := self._fit(run, request)) is not None:
            return compacting
        run.step += 1
        if run.calls:
            run.calls = {}
        if run.chains:
            run.chains = {}
        ctx._record("step_start", {"iteration": iteration + 1, "step": run.step})
        header: dict[str, Any] = {
            "model": self.model.name,
            "settings": dict(self._settings),
        }
        if self.spec.history_processors:
            header["history"] = {"sent": len(messages), "of": ctx.message_count}
        if self._compactor is not None:
            header["tokens"] = self._compactor.last_estimate  # calibrates a restored agent
        if self._budget is not None:  # reserve the worst case, or send nothing (see _reservation)
            # The reservation is logged in the request's header (its ``budget``).
            reserved = self._budget.reserve(self.model, request, run.run_id, run.step, header)
            if isinstance(reserved, RunError):
                ctx._record("request_header", header)
                ctx._record("step_end", {"step": run.step, "error": type(reserved).__name__})
                return self._fail(
                    reserved, "limit" if type(reserved) is BudgetExceeded else "error"
                )
            request = reserved
        ctx._record("request_header", header)
        run.awaiting_model = True
        return [CallModel(run.run_id, run.step, request, self.spec.model_timeout)]

    def _request_context(self) -> RunContext[Any]:
        """What instructions functions and history processors see as a request is built."""
        run = self._run
        assert run is not None
        ctx = self.ctx
        return RunContext(
            tool_context=self.tool_view if self.tool_view is not None else _NO_TOOL_CONTEXT,
            metadata=ctx.metadata_snapshot(),
            agent_id=ctx.agent_id,
            parent_id=ctx.parent_id,
            run_id=run.run_id,
            usage=ctx.usage,
            cancellation=run.token,
        )

    def _processed(self, messages: Sequence[Message]) -> list[Message]:
        """What the history processors let the model see of ``messages`` (see `_history`)."""
        processors = self.spec.history_processors
        return apply_history_processors(processors, self._request_context(), messages)

    def _on_model(self, message: ModelReplied) -> list[Effect]:
        if message.step < 0:
            return self._on_summary(message)
        # Even a late reply settles what its request reserved; the settlement rides on the
        # step's step_end, or is logged apart when none comes (see _reservation).
        budget = self._budget
        settled = budget.settle(message) if budget is not None else None
        run = self._run
        if (
            run is None
            or message.run_id != run.run_id
            or message.step != run.step
            or not run.awaiting_model
        ):
            if settled is not None:
                budget.log_settled(settled, message.run_id, message.step)  # type: ignore[union-attr]
            self.log.debug("late model reply discarded", step=message.step)
            return []
        run.awaiting_model = False
        ctx = self.ctx
        for switch in model_fallbacks(message):
            ctx._record("model_fallback", switch.to_json())
        if message.error is not None or message.response is None:
            error = message.error or RuntimeError("model returned nothing")
            if self._compactor is not None and (retry := self._on_overflow(run, error, settled)):
                return retry
            ended: dict[str, Any] = {"step": run.step, "error": type(error).__name__}
            if settled is not None:
                ended["budget"] = settled
            ctx._record("step_end", ended)
            failure = RunFailedError(
                f"agent {ctx.agent_id!r}: the model failed: {exception_text(error)}"
            )
            failure.__cause__ = error
            return self._fail(failure, reason="error")
        response = message.response
        ctx._add_usage(response.usage)
        if self._compactor is not None:
            self._compactor.observe(response.usage.input_tokens)
            run.overflowed = False
        reply = response.message
        ctx._add_message(reply)
        ended = {
            "step": run.step,
            "finish_reason": response.finish_reason,
            "model": response.model_name,
        }
        if settled is not None:
            ended["budget"] = settled
        ctx._record("step_end", ended)
        calls = reply.tool_calls
        if self._counts_usage and (problem := self._usage_problem(new_calls=len(calls))):
            return self._fail(UsageLimitExceeded(f"agent {ctx.agent_id!r}: {problem}"), "limit")
        if not calls:
            return self._final_text(reply)
        return self._dispatch(calls)

    # -- tool calls ---------------------------------------------------------------------------

    def _dispatch(self, calls: tuple[ToolCall, ...]) -> list[Effect]:
        run = self._run
        assert run is not None
        # First check every call, then start any: a call past its retry budget ends the run
        # before anything of this reply has run or been logged as started.
        planned: list[tuple[ToolCall, str | None, bool]] = []  # call, problem, after final
        seen: set[str] = set()
        final_given = run.final is not None
        for call in calls:
            if call.id in seen:
                # A provider bug; answering the first is all a transcript can hold.
                self.log.warning("duplicate tool call id ignored", tool_call_id=call.id)
                continue
            seen.add(call.id)
            if final_given:
                planned.append((call, None, True))
                continue
            problem = self._retry_problem(call)
            if isinstance(problem, ActorsError):
                return self._fail(problem, reason="error")
            planned.append((call, problem, False))
            if problem is None and call.name == FINAL_RESULT_TOOL and self._output is not None:
                final_given = True
        effects: list[Effect] = []
        snapshot = self.ctx.metadata_snapshot()
        for call, problem, after_final in planned:
            slot = run.calls[call.id] = _Call(call)
            if after_final:
                slot.outcome = ToolOutcome(
                    NOT_EXECUTED.format(reason="a final result was already given"), True
                )
                slot.state = "done"
            elif problem is not None:
                slot.outcome, slot.state = ToolOutcome(problem, True), "done"
            elif call.name == FINAL_RESULT_TOOL and self._output is not None:
                effects.extend(self._accept(self._output.from_arguments(call.arguments), call.id))
            elif call.name in self._subagents:
                effects.extend(self._start_child(slot, self._subagents[call.name], snapshot))
            else:
                tool = self._tools[call.name]
                if tool.requires_approval:
                    request = Request(
                        kind="approval",
                        prompt=f"Allow the tool {tool.name!r} to run?",
                        data={"tool": tool.name, "arguments": call.arguments},
                    )
                    self._park(slot, request, approval=True)
                    continue
                effects.extend(self._launch(slot, tool, call.arguments, snapshot, None))
        effects.extend(self._settle())
        return effects

    def _retry_problem(self, call: ToolCall) -> str | ActorsError | None:
        """Validate a call; return an error text for the model, or a run-ending error."""
        run = self._run
        assert run is not None
        problem: str | None = None
        final = call.name == FINAL_RESULT_TOOL and self._output is not None
        tool = self._tools.get(call.name)
        budget = self.spec.tool_retries
        if final:
            budget = self.spec.output_retries
        elif tool is not None and tool.max_retries is not None:
            budget = tool.max_retries
        known = final or tool is not None or call.name in self._subagents
        if known and INVALID_ARGUMENTS_KEY in call.arguments:
            # The provider could not read the arguments as a JSON object: show them back.
            problem = (
                f"The arguments for tool {call.name!r} were not a JSON object: "
                f"{call.arguments[INVALID_ARGUMENTS_KEY]!r}. Send the arguments as one JSON "
                "object."
            )
        elif final:
            assert self._output is not None
            try:
                self._output.from_arguments(call.arguments)
            except ValidationError as exc:
                problem = f"Invalid final result: {describe_validation_error(exc)}"
        elif call.name in self._subagents:
            problem = validate_task(self._subagents[call.name], call.arguments)
        elif tool is not None:
            try:
                run.validated[call.id] = tool.validate(call.arguments)
            except ValidationError as exc:
                problem = (
                    f"Invalid arguments for tool {call.name!r}: {describe_validation_error(exc)}. "
                    "Fix the arguments and call it again."
                )
        else:
            names = sorted([*self._tools, *self._subagents])
            if self._output is not None and self._use_output_tool:
                names.append(FINAL_RESULT_TOOL)
            problem = f"Unknown tool {call.name!r}. Available tools: {', '.join(names) or 'none'}."
        if problem is None:
            return None
        count = run.retries[call.name] = run.retries.get(call.name, 0) + 1
        if count > budget and final:
            return OutputValidationError(
                f"agent {self.ctx.agent_id!r}: the final answer never matched the output type "
                f"after {budget} retries: {problem}"
            )
        if count > budget:
            return ToolRetriesExceeded(
                f"agent {self.ctx.agent_id!r}: tool {call.name!r} failed {count} times in this "
                f"run (retry budget {budget}): {problem}"
            )
        return problem

    def _call_tool(
        self,
        slot: _Call,
        tool: Tool,
        arguments: Mapping[str, Any],
        snapshot: Mapping[str, Any],
        answer: Answer | None,
    ) -> CallTool:
        run = self._run
        assert run is not None
        token = CancellationToken()
        run.token.on_cancel(token.cancel)
        slot.token, slot.state = token, "running"
        timeout = tool.timeout if tool.timeout is not None else self.spec.tool_timeout
        validated = run.validated.pop(slot.call.id, None)
        if validated is None or arguments is not slot.call.arguments:
            validated = tool.validate(arguments)
        data: dict[str, Any] = {
            "tool_call_id": slot.call.id,
            "name": slot.call.name,
            "arguments": slot.call.arguments,  # plain JSON: ToolCall normalizes its arguments
        }
        if answer is not None:
            data["resumed"] = True
        if arguments is not slot.call.arguments:
            # Approved with edited arguments: the log records what actually ran.
            data["arguments"] = json_copy(dict(arguments), "approved arguments")
            data["edited"] = True
        self.ctx._record("tool_call", data)
        ctx = self.ctx.run_context(
            slot.call,
            tool_context=self.tool_view,
            metadata=snapshot,
            retry=run.retries.get(tool.name, 0),
            timeout=timeout,
            cancellation=token,
            answer=answer,
        )
        self.current_tool = tool.name
        return CallTool(run.run_id, slot.call, tool, validated, ctx, timeout)

    def _on_tool(self, run_id: str, call_id: str, outcome: ToolOutcome) -> list[Effect]:
        run = self._run
        if run is None or run.run_id != run_id:
            run = None
        elif run.validation is not None and call_id == run.validation.effect_id:
            return self._on_verdict(outcome)
        slot = run.calls.get(call_id) if run is not None else None
        if slot is None or slot.state != "running":
            self.log.info("late tool result discarded", tool_call_id=call_id)
            return []
        assert run is not None
        if outcome.pending is not None:
            self._park(slot, outcome.pending)
        else:
            slot.outcome, slot.state = outcome, "done"
        assert run is not None
        if outcome.retry:
            self._count_retry(slot.call.name, content_text(outcome.content))
        started = self._advance(slot, outcome) if run.chains else []
        return [*started, *self._settle()]

    def _count_retry(self, name: str, message: str) -> None:
        """A tool raised ModelRetry: count it; past the budget the run ends after this step."""
        run = self._run
        assert run is not None
        tool = self._tools.get(name)
        budget = self.spec.tool_retries
        if tool is not None and tool.max_retries is not None:
            budget = tool.max_retries
        count = run.retries[name] = run.retries.get(name, 0) + 1
        if count > budget and run.failure is None:
            run.failure = ToolRetriesExceeded(
                f"agent {self.ctx.agent_id!r}: tool {name!r} asked for a retry {count} times in "
                f"this run (retry budget {budget}): {message}"
            )

    def _settle(self) -> list[Effect]:
        """Once no call is running: apply results in call order, then suspend or go on."""
        run = self._run
        assert run is not None
        calls = run.calls.values()
        for slot in calls:
            if slot.state == "running":
                return []
        self.current_tool = None
        ctx = self.ctx
        sets: list[tuple[str, ContextUpdate]] = []
        # Completions arrive in any order; everything is logged here, in call order.
        for slot in calls:
            if slot.child_note is not None:
                ctx._record("subagent_finished", slot.child_note)
                slot.child_note = None
            if slot.state == "parked" and slot.unlogged:
                self._log_park(slot)
            if slot.state != "done":
                continue
            outcome = slot.outcome
            assert outcome is not None
            content, is_error = outcome.content, outcome.is_error
            if outcome.update is not None:
                try:
                    self._check_receivers(outcome.update)
                    events = ctx.apply_update(outcome.update, source=slot.call.id)
                except InvalidUpdateError as exc:
                    content, is_error = f"The tool's context update failed: {exc}", True
                else:
                    name = slot.call.name
                    sequential = name in run.chains  # its calls saw each other's updates
                    sets.append((name if sequential else f"{name}:{slot.call.id}", outcome.update))
                    if outcome.update.sends:
                        self._outbox.extend(sends_of(events))
            ctx._add_message(tool_result(slot.call.id, slot.call.name, content, is_error))
            slot.state = "applied"
        if len(sets) > 1 and (clashes := clashing_sets(sets)):
            warn_clashing_sets(ctx.agent_id, clashes)
        if run.failure is not None:
            return self._fail(run.failure, reason="error")
        if self.approval_handler:
            asks: list[Effect] = []
            for slot in calls:
                if slot.state == "parked" and slot.approval and slot.request is not None:
                    slot.state = "running"  # the handler decides; nothing surfaces to the host
                    tool = self._tools.get(slot.call.name)
                    timeout = tool.timeout if tool and tool.timeout else self.spec.tool_timeout
                    asks.append(AskApproval(run.run_id, slot.call.id, slot.request, timeout))
            if asks:
                return asks
        if any(c.state == "parked" for c in calls):
            return [Finish(run.reply, result=self._result("suspended"))]
        return self._next_step()

    # -- steering -----------------------------------------------------------------------------

    def _steer(self, message: UserMessage) -> list[Effect]:
        # In a run, the message waits for the next step boundary (never between a tool call
        # and its result); if the run ends first, it joins the transcript after the run.
        if self._run is None:
            # Idle: the message waits in the transcript; it starts nothing until the next run.
            self.ctx._add_message(message, source="steer")
        else:
            # Logged now, delivered at the step boundary: a crash in between loses nothing
            # (recovery hands undelivered messages to the transcript).
            self.ctx._record("steered", {"content": content_json(message.content)})
            self._run.steering.append((message, "steer"))
        return []

    # -- ending -------------------------------------------------------------------------------

    def _result(
        self, status: Literal["completed", "suspended", "cancelled"], output: Any = None
    ) -> RunResult[Any]:
        run = self._run
        assert run is not None
        usage = self._run_usage()
        children = run.children_usage
        return RunResult(
            status=status,
            output=output,
            messages=self.ctx.message_view(),
            usage=usage,
            tree_usage=usage if children is _NO_USAGE else usage + children,
            metadata=self.ctx.metadata_snapshot(),
            events=self.ctx.events_view(run.start_seq),
            agent_id=self.ctx.agent_id,
            run_id=run.run_id,
            requests=self.open_requests() if status == "suspended" else (),
        )

    def _complete(self, output: Any) -> list[Effect]:
        run = self._run
        assert run is not None
        self.ctx._record("turn_end", {"run_id": run.run_id, "reason": "completed"})
        result = self._result("completed", output)
        self._run = None
        self._flush_steering(run)
        # A delegated child still running belongs to a tool that timed out: nobody waits on it.
        orphans: list[Effect] = [
            CancelChild(child_id, "the run that started it completed")
            for child_id in sorted(run.delegated)
        ]
        return [*orphans, Finish(run.reply, result=result)]

    def _close_open_calls(self, reason: str) -> list[Effect]:
        """Give every unanswered call a result, close open requests, stop children."""
        run = self._run
        assert run is not None
        effects: list[Effect] = [
            CancelChild(child_id, reason) for child_id in sorted(run.delegated)
        ]
        run.delegated.clear()
        for slot in run.calls.values():
            if slot.child_id and slot.state in ("running", "parked"):
                effects.append(CancelChild(slot.child_id, reason))
                if slot.child_usage is not None:  # its cancelled result will arrive too late
                    run.children_usage = run.children_usage + slot.child_usage
            if slot.state == "parked" and slot.request is not None:
                self.ctx._record(
                    "resumed", {"request_id": slot.request.id, "ok": False, "closed": reason}
                )
        # A call that was running may have had effects: say so, or the model may repeat it.
        started = {c.call.id for c in run.calls.values() if c.state == "running"}

        def content(call: ToolCall) -> str:
            text = INTERRUPTED if call.id in started else NOT_EXECUTED
            return text.format(reason=reason)

        self.ctx.patch_dangling_tool_calls(content)
        run.calls = {}
        run.chains = {}
        return effects

    def _fail(self, error: ActorsError, reason: str) -> list[Effect]:
        run = self._run
        assert run is not None
        run.token.cancel(reason)
        effects = self._close_open_calls(f"the run stopped ({type(error).__name__})")
        self.ctx._record(
            "error", {"type": type(error).__name__, "message": exception_message(error)}
        )
        self.ctx._record("turn_end", {"run_id": run.run_id, "reason": reason})
        if isinstance(error, RunError):
            error.messages = self.ctx.message_view()
            error.usage = self._run_usage() + run.children_usage
            error.agent_id = self.ctx.agent_id
        self._run = None
        self.current_tool = None
        self._flush_steering(run)
        return [*effects, Finish(run.reply, error=error)]

    def _cancel(self, reason: str) -> list[Effect]:
        run = self._run
        if run is None:
            return []
        run.token.cancel(reason)
        effects = self._close_open_calls(f"the run was cancelled ({reason})")
        self.ctx._record("cancelled", {"run_id": run.run_id, "reason": reason})
        self.ctx._record("turn_end", {"run_id": run.run_id, "reason": "cancelled"})
        result = self._result("cancelled")
        self._run = None
        self.current_tool = None
        self._flush_steering(run)
        return [*effects, Finish(run.reply, result=result)]

    def _flush_steering(self, run: _Run) -> None:
        """Messages sent after the run's last step boundary join the transcript, after it.

        Exactly what happens to a message sent just after the run ended (to an idle agent):
        nothing is lost, and where a message lands does not depend on a race with the end.
        """
        for message, source in run.steering:
            self.ctx._add_message(message, source=source)
        run.steering.clear()


_HANDLERS: dict[type[Any], Callable[[AgentLoop, Any], list[Effect]]] = {
    ToolFinished: lambda loop, m: loop._on_tool(m.run_id, m.call_id, m.outcome),
    ModelReplied: AgentLoop._on_model,
    StartRun: AgentLoop._start,
    ChildFinished: AgentLoop._on_child,
    PeerMessage: AgentLoop._on_peer,
    CancelRun: lambda loop, m: loop._cancel(m.reason),
    ResumeRun: AgentLoop._resume,
    Steer: lambda loop, m: loop._steer(m.message),
    ApprovalDecided: AgentLoop._on_approval,
}
"""Each input's handler, by the input's class (one lookup instead of a chain of isinstance).

The functions of `AgentLoop` itself: it has no subclasses (one that overrode a handler would
extend this table)."""


def _joined(instructions: str | None, note: str) -> str | None:
    if instructions and note:
        return f"{instructions}\n\n{note}"
    return instructions or note or None


def model_fallbacks(message: ModelReplied) -> tuple[ModelFallback, ...]:
    """The switches a fallback model made for this reply (or before it failed), in order."""
    if message.response is not None:
        return message.response.fallbacks
    error = message.error
    if not isinstance(error, ModelFallbackError):
        return ()
    failures = error.failures
    return tuple(
        ModelFallback.of(name, failed, failures[n + 1][0])
        for n, (name, failed) in enumerate(failures[:-1])
    )
