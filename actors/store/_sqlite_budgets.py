"""Shared budgets in an SQLite store file: the ``budgets`` and ``budget_holds`` tables.

A budget's row holds its spent and reserved counters; each open hold is a row of
``budget_holds`` with what it reserved. Every function runs inside the caller's write
transaction (``BEGIN IMMEDIATE``), which serialises them across processes. See
`actors.store._budgets`.
"""

from __future__ import annotations

import sqlite3

from actors.store._budgets import BudgetTotals, Caps, Counts

__all__ = ["create_budgets", "read", "reserve", "settle"]

_COUNTERS = ("requests", "input_tokens", "output_tokens", "nano_usd")


def create_budgets(conn: sqlite3.Connection) -> None:
    """Migration 4 -> 5: the ``budgets`` and ``budget_holds`` tables."""
    spent = ", ".join(f"spent_{name} INTEGER NOT NULL DEFAULT 0" for name in _COUNTERS)
    reserved = ", ".join(f"reserved_{name} INTEGER NOT NULL DEFAULT 0" for name in _COUNTERS)
    conn.execute(f"CREATE TABLE budgets (budget TEXT PRIMARY KEY NOT NULL, {spent}, {reserved})")
    held = ", ".join(f"{name} INTEGER NOT NULL" for name in _COUNTERS)
    conn.execute(
        f"CREATE TABLE budget_holds (budget TEXT NOT NULL, hold TEXT NOT NULL, {held},"
        " PRIMARY KEY (budget, hold)) WITHOUT ROWID"
    )


_FITS = " AND ".join(
    f"(:cap{i} IS NULL OR spent_{name} + reserved_{name} + :amount{i} <= :cap{i})"
    for i, name in enumerate(_COUNTERS)
)
_RESERVE = (
    "UPDATE budgets SET "
    + ", ".join(
        f"reserved_{name} = reserved_{name} + :amount{i}" for i, name in enumerate(_COUNTERS)
    )
    + f" WHERE budget = :budget AND {_FITS}"
)
_HOLD = (
    f"INSERT INTO budget_holds (budget, hold, {', '.join(_COUNTERS)})"
    " VALUES (:budget, :hold, :amount0, :amount1, :amount2, :amount3)"
)
_SETTLE = (
    "UPDATE budgets SET "
    + ", ".join(
        f"reserved_{name} = reserved_{name} - :held{i}, spent_{name} = spent_{name} + :spent{i}"
        for i, name in enumerate(_COUNTERS)
    )
    + " WHERE budget = :budget"
)
_READ = (
    "SELECT "
    + ", ".join(f"spent_{name}" for name in _COUNTERS)
    + ", "
    + ", ".join(f"reserved_{name}" for name in _COUNTERS)
    + ", (SELECT COUNT(*) FROM budget_holds AS h WHERE h.budget = b.budget)"
    + " FROM budgets AS b WHERE budget = ?"
)


def reserve(
    conn: sqlite3.Connection, budget: str, hold: str, amount: Counts, caps: Caps
) -> BudgetTotals | None:
    """Hold ``amount`` if it fits (see `BudgetStore.reserve_budget`); in a write transaction."""
    params: dict[str, object] = {"budget": budget, "hold": hold}
    for index in range(4):
        params[f"amount{index}"] = amount[index]
        params[f"cap{index}"] = caps[index]
    conn.execute("INSERT OR IGNORE INTO budgets (budget) VALUES (?)", (budget,))
    if conn.execute(_RESERVE, params).rowcount != 1:
        return read(conn, budget)
    conn.execute(_HOLD, params)  # a hold made twice breaks the key: the whole call is undone
    return None


def settle(conn: sqlite3.Connection, budget: str, hold: str, spent: Counts) -> bool:
    """End a hold (see `BudgetStore.settle_budget`); in a write transaction."""
    row = conn.execute(
        f"DELETE FROM budget_holds WHERE budget = ? AND hold = ? RETURNING {', '.join(_COUNTERS)}",
        (budget, hold),
    ).fetchone()
    if row is None:
        return False
    params: dict[str, object] = {"budget": budget}
    for index in range(4):
        params[f"held{index}"] = row[index]
        params[f"spent{index}"] = spent[index]
    conn.execute(_SETTLE, params)
    return True


def read(conn: sqlite3.Connection, budget: str) -> BudgetTotals:
    """The budget's totals (zeros for one never seen)."""
    row = conn.execute(_READ, (budget,)).fetchone()
    if row is None:
        return BudgetTotals()
    return BudgetTotals(tuple(row[0:4]), tuple(row[4:8]), int(row[8]))
