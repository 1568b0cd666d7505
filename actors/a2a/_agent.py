"""`A2AAgent`: an agent spec whose replies come from a remote A2A agent."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.a2a._model import A2AModel
from actors.exceptions import AgentDefinitionError
from actors.loop._agent import Agent

__all__ = ["A2AAgent"]


class A2AAgent(Agent[str]):
    """A remote A2A agent as an `Agent`: give it to a parent as a subagent.

    ``Agent("boss", subagents=[A2AAgent("http://host:8000", name="researcher")])`` lets the
    boss's model call the remote agent like any child: a child agent is spawned in the tree,
    the task goes to the remote agent as a new A2A task, its streamed text arrives as the
    child's text deltas, and its answer is the child's result. A remote failure, refusal or
    silence past ``timeout`` is the child's error, which the parent's model reads (the parent
    lives on). A remote task that asks for input ends the call with the remote's question as
    the answer. Each call is a task in a new A2A context: the remote keeps no thread across
    calls.

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
