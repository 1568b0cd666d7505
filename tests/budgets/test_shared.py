"""A shared budget holds across processes: its ledger is a row of the store they share."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from actors import Agent, Budget, Runtime
from actors.exceptions import BudgetExceeded, RunFailedError, StoreError, UserError
from actors.loop._budget import ledger_for
from actors.store import MemoryStore, PostgresStore, SQLiteStore
from actors.testing import FunctionModel, ScriptedModel, call

HERE = Path(__file__).parent
PROCESSES, RUNS, ALLOWED = 4, 40, 100


def _processes(store: str, dsn: str = "") -> list[dict[str, Any]]:
    """Run the worker processes against one store at once; what each reports."""
    procs = [
        subprocess.Popen(
            [sys.executable, str(HERE / "shared_worker.py"), store, str(RUNS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "BUDGET_DSN": dsn},
        )
        for _ in range(PROCESSES)
    ]
    try:
        for proc in procs:  # every one ready before any asks: their requests race
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "READY"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.close()
        reports = []
        for proc in procs:
            assert proc.stdout is not None
            reports.append(json.loads(proc.stdout.readline()))
            assert proc.wait(timeout=60) == 0
        return reports
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            assert proc.stdout is not None
            proc.stdout.close()


def _check(reports: list[dict[str, Any]]) -> None:
    billed = sum(report["billed"] for report in reports)
    ended: dict[str, int] = {}
    for report in reports:
        for how, count in report["ended"].items():
            ended[how] = ended.get(how, 0) + count
    # Every request the budget allows is sent, and not one more; the rest fail typed.
    assert billed == ALLOWED, reports
    assert ended == {"ok": ALLOWED, "BudgetExceeded": PROCESSES * RUNS - ALLOWED}


@pytest.fixture
def pg_schema(postgres_dsn: str) -> str:
    schema = f"t_{secrets.token_hex(6)}"
    PostgresStore(postgres_dsn, schema=schema).close()  # made once, before the race
    return schema


def test_processes_sharing_a_postgres_budget_send_no_more_than_it_allows(
    postgres_dsn: str, pg_schema: str
) -> None:
    _check(_processes(f"postgres:{pg_schema}", postgres_dsn))
    with PostgresStore(postgres_dsn, schema=pg_schema) as store:
        totals = store.read_budget("team")
    assert totals.spent[0] == ALLOWED
    assert (totals.reserved, totals.holds) == ((0, 0, 0, 0), 0)


def test_processes_sharing_an_sqlite_budget_send_no_more_than_it_allows(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    SQLiteStore(db).close()
    _check(_processes(f"sqlite:{db}"))
    with SQLiteStore(db) as store:
        totals = store.read_budget("team")
    assert totals.spent[0] == ALLOWED
    assert (totals.reserved, totals.holds) == ((0, 0, 0, 0), 0)


def test_a_sigkill_leaves_holds_that_the_restore_counts_as_spent(tmp_path: Path) -> None:
    """Requests in flight when a process dies stay held; restoring their sessions spends them."""
    db = tmp_path / "shared.db"
    SQLiteStore(db).close()
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "shared_worker.py"), f"sqlite:{db}", "5", "hang"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        assert proc.stdout.readline().strip() == "READY"
        proc.stdin.write("go\n")
        proc.stdin.flush()
        for _ in range(5):  # every agent's request reached the "provider"
            assert proc.stdout.readline().strip() == "SENT"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
        proc.stdout.close()
    with SQLiteStore(db) as store:
        held = store.read_budget("team")
        assert (held.holds, held.reserved[0], held.spent[0]) == (5, 5, 0)
        spec = Agent("w", model=ScriptedModel(["ok"] * 5, per_agent=True))
        with Runtime() as runtime:
            for info in store.list_sessions():
                runtime.restore(info.session_id, store=store, agents=[spec])
        after = store.read_budget("team")
    # Each request may have been billed: counted at its worst case, never released.
    assert after.holds == 0
    assert after.reserved == (0, 0, 0, 0)
    assert after.spent[0] == 5
    assert after.spent[2] == 5 * 16  # max_tokens: the worst case of each reply


def test_trees_of_one_process_share_a_budget_kept_in_a_memory_store() -> None:
    """Every tree whose budget has the name draws on one budget, whatever its caps' owner."""
    budget = Budget(requests=3, shared="team")
    spec = Agent("w", model=ScriptedModel(["ok"] * 10))
    with MemoryStore() as store, Runtime() as runtime:
        first = runtime.spawn(spec, store=store, budget=budget)
        second = runtime.spawn(spec, store=store, budget=budget)
        first.run("go")
        second.run("go")
        first.run("go")
        with pytest.raises(BudgetExceeded, match="shared budget 'team' requests=3 has 0 left"):
            second.run("go")
        assert store.read_budget("team").spent[0] == 3


def test_a_shared_budget_needs_a_store_that_keeps_budgets() -> None:
    """A tree without a store cannot share its budget: a caller's error, at spawn."""
    spec = Agent("w", model=ScriptedModel(["ok"]))
    with Runtime() as runtime, pytest.raises(UserError, match=r"shared='team'.*no store"):
        runtime.spawn(spec, budget=Budget(requests=3, shared="team"))


class _Flaky(MemoryStore):
    """A memory store whose budget calls fail while ``down`` is set (a lost connection)."""

    down = False

    def reserve_budget(self, *args: Any) -> Any:
        if self.down:
            raise StoreError("the budget store is unreachable")
        return super().reserve_budget(*args)

    def settle_budget(self, *args: Any) -> bool:
        if self.down:
            raise StoreError("the budget store is unreachable")
        return super().settle_budget(*args)


def test_an_unreachable_store_fails_the_run_typed_and_sends_nothing() -> None:
    """No reservation, no request: the run fails with `RunFailedError` saying why."""
    sent: list[str] = []

    def reply(messages: Any, tools: Any) -> str:
        sent.append("request")
        return "ok"

    spec = Agent("w", model=FunctionModel(reply))
    with _Flaky() as store, Runtime() as runtime:
        ref = runtime.spawn(spec, store=store, budget=Budget(requests=5, shared="team"))
        store.down = True
        with pytest.raises(RunFailedError, match="shared budget's store could not reserve"):
            ref.run("go")
        assert sent == []
        store.down = False
        ref.run("go")
        totals = store.read_budget("team")
        assert (totals.spent[0], totals.reserved[0], totals.holds) == (1, 0, 0)


def _drops_on_first_reply(store: _Flaky) -> Agent[str]:
    """A spec whose first request sees its store go away before the reply comes back."""
    replies: list[str] = []

    def reply(messages: Any, tools: Any) -> str:
        if not replies:
            store.down = True
        replies.append("ok")
        return "ok"

    return Agent("w", model=FunctionModel(reply))


def test_a_settlement_the_store_missed_is_made_before_the_next_reservation() -> None:
    """Until then the store counts the hold at its worst case; then at what was spent."""
    with _Flaky() as store, Runtime() as runtime:
        ref = runtime.spawn(
            _drops_on_first_reply(store), store=store, budget=Budget(requests=5, shared="team")
        )
        ref.run("go")  # the reply came: the run ends well, and its settlement is owed
        owed = store.read_budget("team")
        assert (owed.spent[0], owed.reserved[0], owed.holds) == (0, 1, 1)
        store.down = False
        ref.run("go")
        totals = store.read_budget("team")
        assert (totals.spent[0], totals.reserved, totals.holds) == (2, (0, 0, 0, 0), 0)


def test_a_restore_makes_the_settlements_the_store_missed_once() -> None:
    """The log marks a settlement the store did not take; a restore makes it, only once."""
    budget = Budget(requests=5, shared="team")
    with _Flaky() as store:
        with Runtime() as runtime:
            spec = _drops_on_first_reply(store)
            runtime.spawn(spec, store=store, budget=budget, session_id="s").run("go")
        store.down = False
        assert store.read_budget("team").holds == 1
        for _ in range(2):
            with Runtime() as runtime:
                runtime.restore("s", store=store, agents=[spec])
                totals = store.read_budget("team")
                assert (totals.spent[0], totals.reserved, totals.holds) == (1, (0, 0, 0, 0), 0)


def test_nested_shared_budgets_reserve_in_both_or_neither() -> None:
    """A request fits every shared budget above it, or holds in none of them."""
    org, team = Budget(requests=3, shared="org"), Budget(requests=2, shared="team")
    with MemoryStore() as store:
        outer = ledger_for(None, org, store)
        inner = ledger_for(outer, team, store)
        assert inner is not None
        assert outer is not None
        assert inner.reserve_held((1, 0, 0, 0), "a") is None
        assert inner.reserve_held((1, 0, 0, 0), "b") is None
        refused = inner.reserve_held((1, 0, 0, 0), "c")  # the team is full; the org is not
        assert refused is not None
        assert "shared budget 'team' requests=2 has 0 left" in refused
        assert outer.reserve_held((1, 0, 0, 0), "d") is None  # the org's last request
        assert store.read_budget("org").holds == 3  # "c" was undone there too
        inner.settle_held((1, 0, 0, 0), (0, 0, 0, 0), "a")  # failed: nothing spent
        assert outer.reserve_held((1, 0, 0, 0), "x") is None  # the org's room, taken again
        refused = inner.reserve_held((1, 0, 0, 0), "e")  # room in the team, none in the org
        assert refused is not None
        assert "shared budget 'org' requests=3 has 0 left" in refused
        assert store.read_budget("team").holds == 1  # "e" was undone in the team
        with pytest.raises(UserError, match="nested in itself"):
            ledger_for(inner, Budget(requests=9, shared="org"), store)


def test_a_subagent_with_a_shared_budget_and_no_store_fails_as_the_childs_error() -> None:
    """The parent's model sees why, and the parent goes on."""
    worker = Agent("w", model=ScriptedModel(["ok"]), budget=Budget(requests=1, shared="team"))
    lead = Agent("lead", model=ScriptedModel([call("w", task="x"), "done"]), subagents=[worker])
    with Runtime() as runtime:
        result = runtime.spawn(lead).run("go")
    assert result.output == "done"
    (error,) = [m.content for m in result.messages if m.role == "tool"]
    assert "UserError: Budget(shared='team') is kept in the tree's store" in error
