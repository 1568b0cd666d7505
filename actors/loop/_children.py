"""The agent loop's children: subagent calls the model makes, and delegations from tools."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.context._usage import Usage
from actors.loop._agent import Agent, Subagent
from actors.loop._outcome import render
from actors.loop._state import _Call, _LoopCore, _Run
from actors.loop._subagent_calls import child_outcome, child_tool_context
from actors.loop._types import ChildFinished, Effect, RunChild, ToolOutcome

__all__ = ["ChildrenMixin"]

_LIVE = ("running", "parked")  # a child call in these states has a child that has not finished


class ChildrenMixin(_LoopCore):
    """Spawning and continuing children, and booking their results (part of `AgentLoop`)."""

    def begin_delegation(self, agent: Agent[Any], task: str) -> tuple[str | None, str | None]:
        """Book a child started from inside a tool: returns ``(child_id, None)`` or a refusal."""
        if self._run is None:  # a tool that outlived its run (cancelled, ignoring its token)
            return None, "the run that started the tool is over"
        if self.depth + 1 > self.limits.max_depth:
            return None, f"max depth {self.limits.max_depth} reached"
        if (refusal := self._children_refusal(self._run)) is not None:
            return None, refusal
        self._children_spawned += 1
        child_id = f"{self.ctx.agent_id}-sub-{self._children_spawned}"
        # Tracked so that cancelling or failing the run cancels the child too.
        self._run.delegated.add(child_id)
        self.ctx._record(
            "subagent_spawned",
            {
                "child_id": child_id,
                "name": agent.name,
                "agent": agent.name,
                "task": task,
                "delegated": True,
                "keep": False,
            },
        )
        return child_id, None

    def _children_refusal(self, run: _Run) -> str | None:
        """Why a new child cannot start now, if it cannot: `TreeLimits.max_children`.

        The limit counts live children, not children over the agent's life: a long-lived
        assistant that delegates once per message keeps doing so. Every child belongs to the
        run in progress (a run that ends cancels the children still running), so the run's own
        state says which are live, restored suspensions included: no counter to keep or persist.
        """
        live = len(run.delegated) + sum(
            1 for slot in run.calls.values() if slot.child_id and slot.state in _LIVE
        )
        limit = self.limits.max_children
        if live < limit:
            return None
        return (
            f"max live children per agent ({limit}) reached: "
            f"{'1 child' if live == 1 else f'{live} children'} of this agent still running; "
            "start more once some have finished"
        )

    def end_delegation(self, child_id: str, status: str, usage: Usage, error: str | None) -> None:
        """Book the end of a delegated child (its usage joins the run's tree usage)."""
        if self._run is not None and child_id in self._run.delegated:
            self._run.delegated.discard(child_id)
            self._run.children_usage = self._run.children_usage + usage
        data: dict[str, Any] = {
            "child_id": child_id,
            "status": status,
            "usage": usage.model_dump(mode="json"),
        }
        if error is not None:
            data["error"] = error
        self.ctx._record("subagent_finished", data)

    def _start_child(
        self, slot: _Call, subagent: Subagent, snapshot: Mapping[str, Any]
    ) -> list[Effect]:
        run = self._run
        assert run is not None
        ctx = self.ctx
        kept = self._kept.get(subagent.tool_name) if subagent.keep else None
        refusal: str | None = None
        if kept is None:
            if self.depth + 1 > self.limits.max_depth:
                refusal = f"max depth {self.limits.max_depth} reached"
            else:
                refusal = self._children_refusal(run)
        if refusal is not None:
            slot.outcome = ToolOutcome(
                f"Subagent {subagent.tool_name!r} was not started: {refusal}.", True
            )
            slot.state = "done"
            return []
        spawn = kept is None
        tool_context: Any = None
        if spawn:
            try:
                tool_context = child_tool_context(subagent, self.tool_context)
            except Exception as exc:  # the user's narrowing function: the child never starts
                self.log.warning(
                    "narrowing a subagent's tool_context failed",
                    subagent=subagent.tool_name,
                    exc_info=exc,
                )
                slot.outcome = ToolOutcome(
                    f"Subagent {subagent.tool_name!r} was not started: its tool_context "
                    f"function failed ({type(exc).__name__}).",
                    True,
                )
                slot.state = "done"
                return []
        task = str(slot.call.arguments.get("task", ""))
        if "input" in slot.call.arguments:
            task = f"{task}\n\nInput:\n{render(slot.call.arguments['input'])}"
        if kept is None:
            self._children_spawned += 1
            child_id = f"{ctx.agent_id}-sub-{self._children_spawned}"
            if subagent.keep:
                self._kept[subagent.tool_name] = child_id
        else:
            child_id = kept
        data: dict[str, Any] = {
            "child_id": child_id,
            "name": subagent.tool_name,
            "agent": subagent.agent.name,
            "task": task,
            "tool_call_id": slot.call.id,
            "keep": subagent.keep,
        }
        if not spawn:
            data["continued"] = True  # a kept child's next task: no new child
        ctx._record("subagent_spawned", data)
        ctx.add_tool_call(slot.call, child_id=child_id)
        slot.state, slot.child_id = "running", child_id
        self.current_tool = subagent.tool_name
        return [
            RunChild(
                run.run_id,
                slot.call.id,
                child_id,
                subagent,
                task,
                # The child's snapshot is the parent's metadata when the step started.
                snapshot,
                subagent.timeout,
                spawn,
                tool_context,
            )
        ]

    def child_ending(self, message: ChildFinished) -> str | None:
        """How the child of ``message`` ended, if the message ends one of this run's calls.

        None for a late result (to be discarded) and for a child that only suspended. Lets a
        host stream a child's end as it happens, while its ``subagent_finished`` event waits
        for the step's results to be logged in call order.
        """
        slot = self._child_slot(message)
        result = message.result
        if slot is None or (result is not None and result.status == "suspended"):
            return None
        return result.status if result is not None else "failed"

    def _child_slot(self, message: ChildFinished) -> _Call | None:
        run = self._run
        slot = run.calls.get(message.call_id) if run and run.run_id == message.run_id else None
        if slot is None or slot.child_id != message.child_id or slot.state != "running":
            return None
        return slot

    def _on_child(self, message: ChildFinished) -> list[Effect]:
        run = self._run
        slot = self._child_slot(message)
        if slot is None:
            self.log.info("late child result discarded", child_id=message.child_id)
            return []
        assert run is not None
        result = message.result
        if result is not None and result.status == "suspended":
            # Not finished: no `subagent_finished`, and its usage so far is only remembered.
            # A resumed child reports its whole run again, so counting it now would count it
            # twice.
            slot.state, slot.child_usage = "parked", message.tree_usage
            slot.child_requests = tuple(
                r.model_copy(update={"path": (self.ctx.agent_id, *r.path)}) for r in result.requests
            )
            return self._settle()
        run.children_usage = run.children_usage + message.tree_usage
        slot.child_usage = None
        status = result.status if result is not None else "failed"
        note: dict[str, Any] = {
            "child_id": message.child_id,
            "status": status,
            "usage": message.tree_usage.model_dump(mode="json"),
        }
        if message.error is not None:
            note["error"] = f"{type(message.error).__name__}: {message.error}"
        slot.child_note = note
        slot.outcome, slot.state = child_outcome(slot.call.name, message), "done"
        return self._settle()
