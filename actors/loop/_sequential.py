"""Read-modify-write within one step: sequential tools, and a warning when parallel calls clash.

The calls of one model reply run in parallel and all see the metadata snapshot taken before the
step, so three calls that each read a counter and ``set`` it to the value plus one end at one.
Two ways out, both deterministic: ``ContextUpdate.increment`` (increments commute), and
``@tool(sequential=True)``, whose calls of one step run one after another, in call order, each
seeing the snapshot plus the updates of the calls of that tool before it. Updates are still
applied to the agent in call order, after the step, like every other update (invariant 4).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from typing import Any

from actors._logging import get_logger
from actors.context._frozen import freeze
from actors.context._suspension import Answer
from actors.context._update import ContextUpdate
from actors.exceptions import InvalidUpdateError
from actors.loop._state import _Call, _Chain, _LoopCore
from actors.loop._tools import Tool
from actors.loop._types import Effect, ToolOutcome

__all__ = ["SequentialMixin", "clashing_sets"]

_log = get_logger("actors.agent")


class SequentialMixin(_LoopCore):
    """Starting tool calls, one at a time for sequential tools (part of `AgentLoop`)."""

    def _launch(
        self,
        slot: _Call,
        tool: Tool,
        arguments: Mapping[str, Any],
        snapshot: Mapping[str, Any],
        answer: Answer | None,
    ) -> list[Effect]:
        """Start a call now, or, for a sequential tool whose previous call runs, queue it."""
        if not tool.sequential:
            return [self._call_tool(slot, tool, arguments, snapshot, answer)]
        run = self._run
        assert run is not None
        chain = run.chains.get(tool.name)
        if chain is None:
            chain = run.chains[tool.name] = _Chain(snapshot)
        elif chain.busy:
            slot.state = "queued"
            chain.waiting.append((slot, arguments, answer))
            return []
        else:  # idle since its last call (a resume): the given snapshot is the newer one
            chain.snapshot = snapshot
        chain.busy = True
        return [self._call_tool(slot, tool, arguments, chain.snapshot, answer)]

    def _advance(self, slot: _Call, outcome: ToolOutcome) -> list[Effect]:
        """A call ended (or parked): start the next queued call of its tool, if it is sequential.

        The next call sees the previous one's metadata update folded onto its snapshot, with
        the same reducer the agent applies it with after the step.
        """
        run = self._run
        assert run is not None
        chain = run.chains.get(slot.call.name)
        if chain is None:
            return []
        chain.busy = False
        if outcome.update is not None and outcome.update.touches_metadata:
            # A failing update fails again when the step applies it: an error result then.
            with contextlib.suppress(InvalidUpdateError):
                chain.snapshot = freeze(
                    outcome.update.fold(chain.snapshot, warn_dropped_events=False)
                )
        if not chain.waiting:
            return []
        queued, arguments, answer = chain.waiting.popleft()
        chain.busy = True
        tool = self._tools[queued.call.name]
        return [self._call_tool(queued, tool, arguments, chain.snapshot, answer)]


def clashing_sets(
    updates: Iterable[tuple[str, ContextUpdate]],
) -> dict[str, list[str]]:
    """Keys that more than one writer ``set`` in one step: key to the writers, in order.

    A writer is a tool call, or a whole sequential tool (its calls saw each other's updates).
    """
    writers: dict[str, list[str]] = {}
    for writer, update in updates:
        for op in update.operations:
            if op.op == "set":
                names = writers.setdefault(op.key, [])
                if writer not in names:
                    names.append(writer)
    return {key: names for key, names in writers.items() if len(names) > 1}


def warn_clashing_sets(agent_id: str, clashes: dict[str, list[str]]) -> None:
    """Log one warning for a step whose parallel calls ``set`` the same keys."""
    _log.warning(
        "parallel tool calls of one step set the same metadata key: the last in call order "
        "wins, and a value read from the snapshot and set back loses the others' changes; "
        "use ContextUpdate.increment, or @tool(sequential=True)",
        agent_id=agent_id,
        keys=sorted(clashes),
        writers={key: clashes[key] for key in sorted(clashes)},
    )
