"""`A2AAgent`: an agent spec whose replies come from a remote A2A agent; also a toolset."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Mapping
from typing import Any

from actors.a2a._model import A2AModel
from actors.context._messages import UserMessage
from actors.exceptions import AgentDefinitionError
from actors.loop._agent import Agent
from actors.loop._tools import Tool
from actors.models._model import ModelRequest

__all__ = ["A2AAgent"]


class A2AAgent(Agent[str]):
    """A remote A2A agent as an `Agent`: give it to a parent as a subagent, or as a toolset.

    ``Agent("boss", subagents=[A2AAgent("http://host:8000", name="researcher")])`` lets the
    boss's model call the remote agent like any child: a child agent is spawned in the tree,
    the task goes to the remote agent as a new A2A task, its streamed text arrives as the
    child's text deltas, and its answer is the child's result. A remote failure, refusal or
    silence past ``timeout`` is the child's error, which the parent's model reads (the parent
    lives on). A remote task that asks for input ends the call with the remote's question as
    the answer. Each call is a task in a new A2A context: the remote keeps no thread across
    calls.

    As a toolset (``Agent("boss", toolsets=[A2AAgent(url, name="researcher")])``) it is one
    tool, named ``name``, that sends its ``task`` argument to the remote agent and returns the
    answer: no child in the tree and no streamed text, the same errors as the tool's error.

    Args:
        url: The remote agent's base URL (its card at ``/.well-known/agent-card.json``).
        name: The child's name, which the parent's model calls it by.
        description: What the parent's model reads about it.
        timeout: Seconds one call may take, end to end.
        connect_timeout: Seconds to connect and read the card.
        headers: HTTP headers for every request (e.g. ``{"Authorization": "Bearer ..."}``);
            never shown in reprs or logs.
        token: Shorthand for a bearer ``Authorization`` header.
    """

    def __init__(
        self,
        url: str,
        *,
        name: str = "remote_agent",
        description: str = "",
        timeout: float = 300.0,
        connect_timeout: float = 10.0,
        headers: Mapping[str, str] | None = None,
        token: str | None = None,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise AgentDefinitionError(
                f"A2AAgent {name!r}: url must be an http(s) URL, got {url!r}"
            )
        if timeout <= 0 or connect_timeout <= 0:
            raise AgentDefinitionError(f"A2AAgent {name!r}: timeouts must be positive")
        sent = dict(headers or {})
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        model = A2AModel(url.rstrip("/"), timeout, connect_timeout, sent)
        super().__init__(
            name=name,
            model=model,
            description=description or f"A remote agent at {url}; send it a task in words.",
            # The remote call is the whole run: one request, bounded by the call's timeout.
            max_iterations=1,
            model_timeout=timeout + connect_timeout,
        )

    @property
    def url(self) -> str:
        """The remote agent's base URL."""
        model: Any = self.model
        url: str = model.url
        return url

    # -- as a toolset ----------------------------------------------------------------------

    @property
    def key(self) -> Hashable:
        """Identity among toolsets: one tool per remote agent and name."""
        return ("a2a", self.url, self.name)

    def open_view(self, loop: asyncio.AbstractEventLoop) -> _ToolView:
        """The toolset's live side: its one tool (nothing to connect ahead of a call)."""
        return _ToolView(_remote_tool(self))


class _ToolView:
    """The one tool of an `A2AAgent` used as a toolset."""

    def __init__(self, tool: Tool) -> None:
        self._tools = (tool,)

    def tools_nowait(self) -> tuple[Tool, ...]:
        return self._tools

    async def aprepare(self) -> None:
        """Nothing to open: each call connects (the remote may come and go)."""

    async def aclose(self) -> None:
        """Nothing held between calls."""


def _remote_tool(agent: A2AAgent) -> Tool:
    model: A2AModel = agent.model  # type: ignore[assignment]

    async def call_remote(task: str) -> str:
        """Send a task to the remote agent; its answer.

        Args:
            task: What the remote agent should do, in words.
        """
        request = ModelRequest(messages=(UserMessage(content=task),), agent_id=agent.name)
        response = await model.request(request)
        return response.message.content

    # The call bounds itself (``timeout``); the tool's own limit is a backstop past it.
    return Tool.from_function(
        call_remote,
        name=agent.name,
        description=agent.description,
        timeout=model.timeout + model.connect_timeout + 5,
    )
