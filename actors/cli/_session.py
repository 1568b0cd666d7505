"""Sessions as the command keeps them: how to rebuild their specs, and how to report them."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pydantic_core
from pydantic import BaseModel

from actors import Agent, AgentContext, Request, RunResult, Usage
from actors.cli._answers import describe_request
from actors.cli._output import Output
from actors.loop._budget import ZERO
from actors.loop._budget_log import budget_of, spend_of
from actors.models._prices import NANO
from actors.store import SessionStore
from actors.store._budgets import keeps_budgets

__all__ = [
    "SessionKind",
    "new_session_id",
    "print_outcome",
    "print_usage",
    "render_output",
    "team_specs",
]


@dataclass(frozen=True)
class SessionKind:
    """What the command writes into a session's data so ``sessions resume`` can rebuild it.

    Attributes:
        kind: ``"demo"`` or ``"run"``.
        target: For ``run``: the ``MODULE:AGENT`` that defines the root spec.
        model: For ``demo``: the model string, or None for the scripted models.
        pace: For ``demo``: the speed of its simulated work.
    """

    kind: str
    target: str | None = None
    model: str | None = None
    pace: float = 1.0

    def to_data(self, root_name: str) -> dict[str, Any]:
        """The session's data: the root's name and this, under ``"cli"``."""
        cli = {"kind": self.kind, "target": self.target, "model": self.model, "pace": self.pace}
        return {"agent": root_name, "cli": cli}

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> SessionKind | None:
        """Read it back; None for a session the command did not start."""
        cli = data.get("cli")
        if not isinstance(cli, dict) or cli.get("kind") not in ("demo", "run"):
            return None
        return cls(
            str(cli["kind"]),
            cli.get("target"),
            cli.get("model"),
            float(cli.get("pace", 1.0)),
        )


def new_session_id() -> str:
    """A fresh, short session id."""
    return uuid.uuid4().hex[:12]


def render_output(output: Any) -> str:
    """A run's output as text: strings as they are, anything else as JSON."""
    if isinstance(output, str):
        return output
    if isinstance(output, BaseModel):
        return output.model_dump_json(indent=2)
    try:  # pydantic's encoder: models inside lists and dicts become JSON too
        return pydantic_core.to_json(output, indent=2).decode()
    except pydantic_core.PydanticSerializationError:
        return repr(output)


def _usage_cells(usage: Usage) -> list[object]:
    return [usage.requests, usage.input_tokens, usage.output_tokens, usage.tool_calls]


def print_usage(out: Output, store: SessionStore, session_id: str) -> None:
    """Usage per agent of the session, as stored (every run of each agent), and the total.

    A session under a budget also shows what each agent's requests cost (as priced by the
    budget: settled at what providers reported, and a request whose reply never came at its
    worst case), and the budget given at spawn.
    """
    stored = store.load(session_id)
    rows: list[list[object]] = []
    total = Usage()
    contexts = [(a, AgentContext.deserialize(a.context)) for a in stored.agents]
    priced = any(ctx._budgeted for _, ctx in contexts)  # the fold knows which logs have budgets
    spent = ZERO
    budget = None
    for agent, ctx in contexts:
        usage = ctx.usage
        total = total + usage
        row = [agent.record.agent_id, agent.record.name, *_usage_cells(usage)]
        if priced:
            own = spend_of(ctx.events)
            spent = spent.plus(own)
            row.append(_dollars(own.usd))
            if agent.record.agent_id == stored.root_agent_id:
                budget = budget_of(ctx.events)
        rows.append(row)
    headers = ["agent", "spec", "requests", "input tok", "output tok", "tool calls"]
    if priced:
        headers.append("cost")
        rows.append(["total", "", *_usage_cells(total), _dollars(spent.usd)])
    else:
        rows.append(["total", "", *_usage_cells(total)])
    out.table(headers, rows)
    if budget is not None:
        caps = budget.model_dump(include={"usd", "requests", "input_tokens", "output_tokens"})
        given = ", ".join(f"{k}={v}" for k, v in caps.items() if v is not None)
        out.line(
            f"budget ({given or 'no caps'}): spent {_dollars(spent.usd)}, {spent.requests} requests"
        )
        if budget.shared is not None and keeps_budgets(store):
            shared = store.read_budget(budget.shared)
            out.line(
                f"shared budget {budget.shared!r}, every tree that draws on it: spent "
                f"{_dollars(Decimal(shared.spent[3]) / NANO)}, {shared.spent[0]} requests; "
                f"{shared.holds} requests in flight"
            )


def _dollars(amount: Decimal) -> str:
    return f"${amount:.6f}".rstrip("0").rstrip(".") if amount else "$0"


def print_metadata(out: Output, store: SessionStore, session_id: str) -> None:
    """What each agent keeps in its metadata (written by its tools' ContextUpdates)."""
    stored = store.load(session_id)
    rows: list[list[object]] = []
    for agent in stored.agents:
        metadata = AgentContext.deserialize(agent.context).metadata
        for key, value in metadata.items():
            text = json.dumps(value, ensure_ascii=False)
            rows.append([agent.record.agent_id, key, text if len(text) <= 70 else text[:69] + "…"])
    if rows:
        out.table(["agent", "key", "value"], rows)
    else:
        out.line("(no agent wrote metadata)")


def resume_hint(session_id: str, requests: Sequence[Request], db_flag: str) -> str:
    """The command that answers ``requests``."""
    answers = " ".join(f"--answer {r.id}=true" for r in requests)
    return f"actors sessions resume {session_id} {answers}{db_flag}"


def print_outcome(
    out: Output,
    result: RunResult[Any],
    *,
    session_id: str,
    db_flag: str,
) -> None:
    """How the run ended: the answer, or the open requests and how to answer them."""
    if result.status == "completed":
        out.heading("answer")
        out.line(render_output(result.output))
    elif result.status == "suspended":
        out.heading("suspended")
        out.line(f"{len(result.requests)} request(s) wait for an answer:")
        for request in result.requests:
            out.line(f"  {describe_request(request)}")
        out.line(f"answer with: {resume_hint(session_id, result.requests, db_flag)}")
    else:
        out.heading("cancelled")
        out.line("the run was cancelled; the session keeps what was done")


def team_specs(root: Agent[Any]) -> list[Agent[Any]]:
    """Every spec of a tree, the root first (what `Runtime.restore` matches by name)."""
    out: list[Agent[Any]] = []
    todo = [root]
    while todo:
        spec = todo.pop(0)
        if spec not in out:
            out.append(spec)
            todo.extend(s.agent for s in spec.subagent_map.values())
    return out
