"""``actors sessions show`` reports what a budgeted session cost, from its logs."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from actors import Agent, Budget, Price, Runtime
from actors.cli import main
from actors.store import SQLiteStore
from actors.testing import ScriptedModel, call


def test_sessions_show_reports_cost_and_the_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACTORS_HOME", str(tmp_path / "home"))
    db = tmp_path / "s.sqlite"
    worker = Agent("w", model=ScriptedModel(["one two"], per_agent=True, name="cheap"))
    lead = Agent("lead", model=ScriptedModel([call("w", task="t"), "done"]), subagents=[worker])
    prices = {
        "scripted": Price(input=Decimal(1), output=Decimal(2)),
        "cheap": Price(input=0, output=0),
    }
    with SQLiteStore(db) as store, Runtime() as runtime:
        ref = runtime.spawn(lead, store=store, session_id="s1", budget=Budget(usd=1, prices=prices))
        result = ref.run("go")
    usage = result.usage  # the lead's own requests: the only ones with a price above 0
    nano = (usage.input_tokens * 1 + usage.output_tokens * 2) * 1000
    dollars = f"${Decimal(nano) / 10**9:.6f}".rstrip("0")

    capsys.readouterr()
    assert main(["sessions", "show", "s1", "--db", str(db), "--plain"]) == 0
    out = capsys.readouterr().out
    usage_table = out.split("usage per agent", 1)[1]
    header, *rows = [line for line in usage_table.splitlines() if line.strip()]
    assert header.split()[-1] == "cost"
    by_agent = {row.split()[0]: row.split()[-1] for row in rows if not row.startswith("budget")}
    assert by_agent["lead"] == dollars
    assert by_agent["lead-sub-1"] == "$0"
    assert by_agent["total"] == dollars
    assert f"budget (usd=1): spent {dollars}, 3 requests" in out


def test_sessions_show_adds_what_a_shared_budget_spent_in_every_tree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACTORS_HOME", str(tmp_path / "home"))
    db = tmp_path / "s.sqlite"
    spec = Agent("a", model=ScriptedModel(["ok"] * 3))
    budget = Budget(requests=10, shared="team")
    with SQLiteStore(db) as store, Runtime() as runtime:
        runtime.spawn(spec, store=store, session_id="s1", budget=budget).run("go")
        runtime.spawn(spec, store=store, session_id="s2", budget=budget).run("go")
    capsys.readouterr()
    assert main(["sessions", "show", "s1", "--db", str(db), "--plain"]) == 0
    out = capsys.readouterr().out
    assert "budget (requests=10): spent $0, 1 requests" in out  # this session's
    assert "shared budget 'team', every tree that draws on it: spent $0, 2 requests" in out
