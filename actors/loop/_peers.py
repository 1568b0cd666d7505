"""The agent loop's peer messages: sends a tool asked for, and messages other agents sent.

A tool returns ``ContextUpdate().send(to, content)``; when the loop applies the update (in
call order, like every update) the context logs a ``message_sent`` event numbered after the
agent's previous sends, and the loop hands its host a `SendMessage` effect with the step's
other effects, so the host delivers it only once the step is written (write-ahead, as for
tool calls). An unknown receiver fails the whole update: the tool's result is an error.

A message that arrives (`PeerMessage`) is logged at once (``message_received``). Idle, the
agent adds it to its transcript and, with ``Agent(on_message="run")``, starts a turn on it;
in a run, it joins the transcript at the next step boundary, like a steering message. A
message numbered at most the last one heard from its sender is a duplicate (its sender was
restored and sent it again) and changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from actors.context._events import Event
from actors.context._messages import UserMessage, user_message
from actors.context._update import ContextUpdate
from actors.exceptions import UnknownAgentError
from actors.loop._state import _LoopCore
from actors.loop._types import Effect, PeerMessage, SendMessage

__all__ = ["PeersMixin", "peer_message", "sends_of"]

PeerDirectory = Callable[[str], bool]
"""Whether the host knows an agent of this id (live, or asleep in its store)."""


def peer_message(sender: str, content: str | list[dict[str, Any]]) -> UserMessage:
    """The user message a peer message becomes in its receiver's transcript.

    ``content`` is as logged: text, or the JSON of parts (the sender's note goes first).
    """
    if isinstance(content, str):
        return user_message(f"[message from {sender}]\n{content}")
    return UserMessage(content=[f"[message from {sender}]", *content])


def sends_of(events: Sequence[Event]) -> list[SendMessage]:
    """The `SendMessage` effects of the ``message_sent`` events among ``events``."""
    return [
        SendMessage(e.data["message_id"], e.data["n"], e.data["to"], e.data["content"])
        for e in events
        if e.type == "message_sent"
    ]


class PeersMixin(_LoopCore):
    """Sending and receiving peer messages (part of `AgentLoop`)."""

    peer_exists: PeerDirectory | None
    _outbox: list[Effect]

    def _check_receivers(self, update: ContextUpdate) -> None:
        """Refuse an update that sends to an agent the host does not know."""
        sends = update.sends
        if not sends:
            return
        known = self.peer_exists
        for send in sends:
            if known is None or not known(send.to):
                raise UnknownAgentError(
                    f"no agent {send.to!r} to send a message to: peer messages go to agents "
                    "of this host by id (live, or asleep in their store)"
                )

    def _on_peer(self, message: PeerMessage) -> list[Effect]:
        ctx = self.ctx
        if message.n <= ctx.last_heard(message.sender):
            return []  # delivered before: its sender was restored and sent it again
        ctx._record(
            "message_received",
            {
                "message_id": message.message_id,
                "from": message.sender,
                "n": message.n,
                "content": message.content,
            },
        )
        text = peer_message(message.sender, message.content)
        run = self._run
        if run is not None:
            run.steering.append((text, "peer"))  # at the next step boundary
            return []
        self._introduce()
        ctx._add_message(text, source="peer")
        if self.spec.on_message == "run":
            data = {"trigger": "message", "message_id": message.message_id}
            return self._open_run(None, None, data)
        return []

    def _open_run(
        self, run_id: str | None, reply: Any, data: dict[str, Any] | None = None
    ) -> list[Effect]:
        raise NotImplementedError

    def _introduce(self) -> None:
        raise NotImplementedError
