"""`AgentActor`: an agent's cell hosted by a pooled pykka actor."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actors.host._cell import AgentCell
from actors.host._messages import Passivate, settle
from actors.host._node import AgentNode
from actors.runtime._mailbox import Dispatcher
from actors.runtime._pooled import PooledActor

__all__ = ["AgentActor"]


class AgentActor(PooledActor):
    """A pykka actor (no thread of its own) that feeds its messages to an `AgentCell`.

    Everything is in the cell: an agent behaves the same whatever hosts it.
    """

    def __init__(
        self,
        dispatcher: Dispatcher,
        cell: AgentCell,
        observe: Callable[[AgentNode, bool], None] | None = None,
    ) -> None:
        super().__init__(dispatcher)
        self.actors_cell = cell
        self.actors_observe = observe  # told after each message whether the agent is idle

    def on_receive(self, message: Any) -> Any:
        cell = self.actors_cell
        if isinstance(message, Passivate):
            if cell.idle:
                cell.passivating = True
                self._stop()  # in this turn: nothing can slip in between the check and the stop
                settle(message.future, result=True)
            else:
                settle(message.future, result=False)
            return None
        try:
            return cell.receive(message)
        finally:
            if self.actors_observe is not None:
                self.actors_observe(cell.node, cell.idle)

    def on_stop(self) -> None:
        self.actors_cell.release("stopped")

    def on_failure(self, *args: Any) -> None:
        self.actors_cell.release("failed")
