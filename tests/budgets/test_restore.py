"""A budget holds across a SIGKILL and a restore: reservations and spend are in the log."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from actors import Runtime
from actors.exceptions import BudgetExceeded
from actors.store import SQLiteStore

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from budget_crash import BUDGET, LIMITS, PRICE, USAGE, specs  # noqa: E402


def _run_until(db: Path, bill: Path, billed: int) -> None:
    """Run the tree in a process; SIGKILL it once ``billed`` requests reached the provider."""
    env = {**os.environ, "BUDGET_BILL": str(bill)}
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "budget_crash.py"), str(db), "s"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    seen = 0
    try:
        for line in proc.stdout:
            if line.startswith("BILLED"):
                seen += 1
                if seen >= billed:
                    proc.send_signal(signal.SIGKILL)
                    break
    finally:
        proc.stdout.close()
        proc.wait(timeout=30)


@pytest.mark.slow
@pytest.mark.parametrize("billed", [5, 12, 19])
def test_what_providers_bill_never_passes_the_budget_across_a_sigkill(
    tmp_path: Path, billed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, bill = tmp_path / "s.sqlite", tmp_path / "bill.txt"
    bill.touch()
    monkeypatch.setenv("BUDGET_BILL", str(bill))
    _run_until(db, bill, billed)
    assert len(bill.read_text().splitlines()) >= billed

    with SQLiteStore(db) as store, Runtime(limits=LIMITS) as runtime:
        ref = runtime.restore("s", store=store, agents=[specs()])
        ledger = runtime._host.nodes[ref.agent_id].ledger
        assert ledger is not None
        assert ledger.budget == BUDGET  # the budget given at spawn, from the log
        # Every request that reached the provider was reserved first, so it is counted.
        assert ledger.spent.requests >= len(bill.read_text().splitlines())
        for _ in range(2):  # spend what is left, and then some
            with contextlib.suppress(BudgetExceeded):
                ref.run("again", timeout=60)
        assert ledger.reserved.requests == 0

    charged = len(bill.read_text().splitlines())
    assert charged <= BUDGET.requests
    dollars = charged * PRICE.cost(USAGE.input_tokens, USAGE.output_tokens)
    assert BUDGET.usd is not None
    assert dollars <= BUDGET.usd


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_restored_session_goes_on_with_what_its_logs_say_was_spent(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    from actors import Agent, Budget
    from actors.store import PostgresStore
    from actors.testing import ScriptedModel

    def spec() -> Agent[Any]:
        model = ScriptedModel(["one", "two", "three"], per_agent=True)
        return Agent("a", model=model, budget=Budget(requests=2))  # on the spec: not logged

    def store() -> Any:
        if kind == "postgres":
            return PostgresStore(request.getfixturevalue("postgres_dsn"))
        return SQLiteStore(tmp_path / "s.sqlite")

    with store() as first, Runtime() as runtime:
        assert runtime.spawn(spec(), store=first, session_id="s").run("1").output == "one"
    with store() as second, Runtime() as runtime:
        assert runtime.restore("s", store=second, agents=[spec()]).run("2").output == "two"
    with store() as third, Runtime() as runtime:
        ref = runtime.restore("s", store=third, agents=[spec()])
        with pytest.raises(BudgetExceeded, match="budget requests=2 has 0 left"):
            ref.run("3")


def test_a_damaged_budget_event_is_refused_typed_when_the_log_is_read() -> None:
    from actors import Agent, AgentContext, Budget
    from actors.exceptions import SerializationError
    from actors.testing import ScriptedModel, SyncDriver

    driver = SyncDriver(Agent("a", model=ScriptedModel(["ok"]), budget=Budget(requests=3)))
    driver.run("hi")
    blob = driver.context.serialize()
    for event in blob["events"]:
        if event["type"] == "step_end":
            event["data"]["budget"]["spent"] = {"requests": "one"}
    with pytest.raises(SerializationError, match="step_end"):
        AgentContext.deserialize(blob)
    old = _first_format(driver.context.serialize())
    for event in old["events"]:
        if event["type"] == "budget_settled":
            event["data"]["spent"] = {"requests": "one"}
    with pytest.raises(SerializationError, match="budget_settled"):
        AgentContext.deserialize(old)


def _first_format(blob: dict[str, Any]) -> dict[str, Any]:
    """``blob`` as the first format of budgets logged it: events of their own."""
    events: list[dict[str, Any]] = []
    run_id, step = "", 0
    for event in blob["events"]:
        data = dict(event["data"])
        run_id = data.get("run_id", run_id) if event["type"] == "turn_start" else run_id
        step = data.get("step", step) if event["type"] == "step_start" else step
        budget = data.pop("budget", None)
        events.append({**event, "data": data})
        if budget is not None:
            kind = "budget_reserved" if event["type"] == "request_header" else "budget_settled"
            events.append(
                {**event, "type": kind, "data": {"run_id": run_id, "step": step, **budget}}
            )
    for seq, event in enumerate(events):
        event["seq"] = seq
    return {**blob, "events": events}


def test_a_log_of_the_first_format_is_read_the_same() -> None:
    """Logs written before reservations rode on request_header/step_end still restore."""
    from actors import Agent, AgentContext, Budget
    from actors.loop._budget import Amount
    from actors.loop._budget_log import spend_of
    from actors.testing import ScriptedModel, SyncDriver

    spec = Agent("a", model=ScriptedModel(["one", "two"]), budget=Budget(requests=5))
    driver = SyncDriver(spec)  # a budget on the spec: no budget_set, only the requests say it
    driver.run("1")
    driver.run("2")
    blob = driver.context.serialize()
    new = AgentContext.deserialize(blob)
    old = AgentContext.deserialize(_first_format(blob))
    assert new._budgeted
    assert old._budgeted
    assert spend_of(new.events) == spend_of(old.events)
    assert spend_of(new.events).requests == 2

    # A request whose reply never came (a SIGKILL): its reservation counts as spent.
    for event in reversed(blob["events"]):
        if event["type"] == "step_end":
            del event["data"]["budget"]
            break
    cut = AgentContext.deserialize(blob)
    cut_old = AgentContext.deserialize(_first_format(blob))
    last = [e.data["budget"] for e in new.events if e.type == "step_end"][-1]
    assert spend_of(cut.events) == spend_of(cut_old.events)
    assert spend_of(cut.events) == spend_of(new.events).minus(Amount.from_json(last["spent"])).plus(
        Amount.from_json(last["reserved"])
    )
