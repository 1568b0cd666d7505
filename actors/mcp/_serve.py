"""An agent tree served as an MCP server: one tool that runs the agent on a task.

Each call spawns a fresh tree in the server's `Runtime`, runs it on the task and answers with
its output. A run that suspends asks the client through MCP elicitation: on a 2025-era
connection inline (``elicitation/create``), on a 2026 one by answering the call with the
questions (``InputRequiredResult``) and resuming the parked run when the client calls again
with the answers. A client that declared no elicitation gets an error result instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import threading
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
import mcp.types as mcp_types
from mcp.server.mcpserver import Context, MCPServer
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

from actors._logging import get_logger
from actors._safe import exception_text
from actors.context._result import RunResult
from actors.exceptions import RunError, UserError
from actors.host import AgentRef
from actors.loop._agent import Agent
from actors.loop._outcome import render
from actors.mcp._elicitation import answer_of, form_of
from actors.runtime import Runtime

__all__ = ["mcp_server", "serve"]

_log = get_logger("actors.mcp")

_NAME = re.compile(r"[^A-Za-z0-9_-]")

MAX_ROUNDS = 20
"""Questions a served run may ask in a row before the call fails (a loop guard)."""


def mcp_server(
    agent: Agent[Any],
    *,
    runtime: Runtime | None = None,
    tool_name: str | None = None,
    description: str | None = None,
    tool_context: Any = None,
    timeout: float = 600.0,
    name: str | None = None,
) -> MCPServer[Any]:
    """An MCP server (the SDK's ``MCPServer``) with one tool that runs ``agent`` on a task.

    Each call runs a fresh tree of ``agent`` (subagents included) on the call's ``task`` and
    answers with the run's output as text. Questions the run asks (approvals, ``Pending``
    requests) go to the client as MCP elicitation forms; a client that cannot answer them gets
    an error result, and the run is cancelled.

    Args:
        agent: The agent spec to serve.
        runtime: Run the trees here; by default the server owns a `Runtime`, started with
            the server and shut down with it.
        tool_name: The tool's name; the agent's name by default.
        description: What the client's model reads about the tool; the agent's
            ``description`` by default.
        tool_context: The static channel of every run (never sent to the client).
        timeout: Seconds one call may run (and a question may wait for its answer).
        name: The server's name; the agent's name by default.

    Returns:
        The server: run it with ``.run()`` (stdio), or see `serve`.

    Raises:
        UserError: ``agent`` is not an `Agent`, or the timeout is not positive.
    """
    if not isinstance(agent, Agent):
        raise UserError(f"mcp_server serves an Agent, got {type(agent).__name__}")
    if timeout <= 0:
        raise UserError(f"timeout must be positive, got {timeout}")
    host = _AgentTool(agent, runtime, tool_context, timeout)

    @contextlib.asynccontextmanager
    async def lifespan(_server: MCPServer[Any]) -> AsyncIterator[None]:
        async with host.running():
            yield

    server: MCPServer[Any] = MCPServer(name or agent.name, lifespan=lifespan)
    server.add_tool(
        host.call,
        name=tool_name or _NAME.sub("_", agent.name),
        description=description
        or agent.description
        or f"Run the {agent.name!r} agent on a task and return its answer.",
        structured_output=False,
    )
    return server


def serve(
    agent: Agent[Any],
    *,
    http: tuple[str, int] | None = None,
    tool_context: Any = None,
    timeout: float = 600.0,
) -> None:
    """Serve ``agent`` as an MCP server until the client (or a signal) ends it; blocks.

    Args:
        agent: The agent spec to serve.
        http: ``(host, port)`` to serve streamable HTTP at ``http://host:port/mcp``; stdio
            (the default) otherwise.
        tool_context: The static channel of every run.
        timeout: Seconds one call may run.
    """
    server = mcp_server(agent, tool_context=tool_context, timeout=timeout)
    if http is None:
        server.run()
    else:
        host, port = http
        server.run(transport="streamable-http", host=host, port=port)


@dataclass
class _Parked:
    """A suspended run waiting for a 2026 client to call again with the answers."""

    ref: AgentRef[Any]
    result: RunResult[Any]
    cancel_expiry: Any


class _AgentTool:
    """The served tool: runs trees in a runtime, asks the client the questions they raise."""

    def __init__(
        self, agent: Agent[Any], runtime: Runtime | None, tool_context: Any, timeout: float
    ) -> None:
        self.agent = agent
        self.runtime = runtime
        self.owns_runtime = runtime is None
        self.tool_context = tool_context
        self.timeout = timeout
        self.parked: dict[str, _Parked] = {}

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        if self.owns_runtime:
            self.runtime = Runtime()
        try:
            yield
        finally:
            for token in list(self.parked):
                self._expire(token)
            if self.owns_runtime and self.runtime is not None:
                runtime, self.runtime = self.runtime, None
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(runtime.shutdown)

    async def call(
        self,
        task: Annotated[str, Field(description="The task for the agent, self-contained.")],
        ctx: Context,
    ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult:
        """Run the agent on ``task`` (or go on with a parked run the client answered)."""
        runtime = self.runtime
        if runtime is None:
            return _error("the server is not running")
        if ctx.request_state is not None:
            parked = self.parked.pop(ctx.request_state, None)
            if parked is None:
                return _error(
                    "these answers are for a question that is no longer open (it expired, or "
                    "the server restarted); call the tool again"
                )
            parked.cancel_expiry()
            responses = ctx.input_responses or {}
            answers = {
                r.id: answer_of(r, _elicit_result(responses.get(r.id)))
                for r in parked.result.requests
            }
            return await self._go_on(parked.ref, ctx, self._resume(parked.ref, answers))
        if not isinstance(task, str) or not task.strip():
            return _error("the task must be a non-empty string")
        try:
            ref = await anyio.to_thread.run_sync(
                functools.partial(runtime.spawn, self.agent, tool_context=self.tool_context)
            )
        except Exception as exc:  # a spec whose MCP servers fail to open, say
            return _error(f"the agent could not start: {exception_text(exc)}")
        return await self._go_on(ref, ctx, self._run(ref, task))

    async def _run(self, ref: AgentRef[Any], task: str) -> RunResult[Any]:
        with anyio.fail_after(self.timeout):
            return await ref.run_async(task)

    async def _resume(self, ref: AgentRef[Any], answers: dict[str, Any]) -> RunResult[Any]:
        resume = functools.partial(ref.resume, answers, timeout=self.timeout)
        return await anyio.to_thread.run_sync(resume, abandon_on_cancel=True)

    async def _go_on(
        self, ref: AgentRef[Any], ctx: Context, step: Any
    ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult:
        """Drive a run to its end, asking the client whatever it asks; then stop the tree."""
        keep = False
        try:
            result: RunResult[Any] = await step
            for _ in range(MAX_ROUNDS):
                if result.status != "suspended":
                    break
                problem = _cannot_ask(ctx)
                if problem is not None:
                    prompts = "; ".join(r.prompt or r.kind for r in result.requests)
                    return _error(f"the agent asked: {prompts}; {problem}")
                if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
                    keep = True  # parked until the client calls again with the answers
                    return self._park(ref, result)
                answers = {}
                for request in result.requests:
                    message, schema = form_of(request)
                    answer = await ctx.session.elicit_form(
                        message, schema, related_request_id=ctx.request_id
                    )
                    answers[request.id] = answer_of(request, answer)
                result = await self._resume(ref, answers)
            else:
                return _error(f"the agent asked more than {MAX_ROUNDS} questions in a row")
        except TimeoutError:
            return _error(f"the agent did not finish within {self.timeout:g} s")
        except RunError as exc:
            return _error(f"the agent's run failed: {type(exc).__name__}: {exc}")
        except anyio.get_cancelled_exc_class():
            with contextlib.suppress(Exception):
                ref.cancel("the MCP client cancelled the call")
            raise
        finally:
            if not keep:
                self._stop(ref)
        if result.status == "cancelled":
            return _error("the agent's run was cancelled")
        return mcp_types.CallToolResult(
            content=[mcp_types.TextContent(type="text", text=render(result.output))]
        )

    def _park(self, ref: AgentRef[Any], result: RunResult[Any]) -> mcp_types.InputRequiredResult:
        token = uuid.uuid4().hex
        # A question nobody answers does not keep its tree forever.
        timer = asyncio.get_running_loop().call_later(self.timeout, self._expire, token)
        self.parked[token] = _Parked(ref, result, timer.cancel)
        requests: dict[str, mcp_types.InputRequest] = {}
        for request in result.requests:
            message, schema = form_of(request)
            requests[request.id] = mcp_types.ElicitRequest(
                params=mcp_types.ElicitRequestFormParams(message=message, requested_schema=schema)
            )
        return mcp_types.InputRequiredResult(input_requests=requests, request_state=token)

    def _expire(self, token: str) -> None:
        parked = self.parked.pop(token, None)
        if parked is not None:
            parked.cancel_expiry()
            with contextlib.suppress(Exception):
                parked.ref.cancel("its questions were never answered")
            self._stop(parked.ref)

    @staticmethod
    def _stop(ref: AgentRef[Any]) -> None:
        # Stopping asks the actors and waits a little: never on the server's loop.
        def stop() -> None:
            with contextlib.suppress(Exception):
                ref.stop()

        threading.Thread(target=stop, name="actors-mcp-stop", daemon=True).start()


def _cannot_ask(ctx: Context) -> str | None:
    capabilities = ctx.client_capabilities
    if capabilities is None or capabilities.elicitation is None:
        return "this MCP client does not support elicitation, so it cannot answer"
    return None


def _elicit_result(response: Any) -> mcp_types.ElicitResult | None:
    return response if isinstance(response, mcp_types.ElicitResult) else None


def _error(text: str) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=text)], is_error=True
    )
