"""Shared budgets in a Postgres store: the ``budgets`` and ``budget_holds`` tables.

A reservation is one statement: an upsert of the budget's row whose update only happens when
the amount fits under the caps (Postgres re-checks the condition on the latest version of a
row it had to wait for, so concurrent reservations never pass a cap), chained to the insert
of the hold. A settlement is one statement too: the hold's delete chained to the row's update,
so a hold already settled changes nothing. See `actors.store._budgets`.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from actors.store._budgets import BudgetTotals, Caps, Counts
from actors.store._pg_sql import BUDGET_COUNTERS as _COUNTERS

if TYPE_CHECKING:
    from actors.store._pg_link import Connection

__all__ = ["read", "reserve", "settle"]


@cache  # one schema per store: made once
def _reserve(s: str) -> str:
    fits_row = " AND ".join(
        f"(%(cap{i})s::bigint IS NULL OR b.spent_{name} + b.reserved_{name}"
        f" + %(amount{i})s::bigint <= %(cap{i})s::bigint)"
        for i, name in enumerate(_COUNTERS)
    )
    fits_alone = " AND ".join(
        f"(%(cap{i})s::bigint IS NULL OR %(amount{i})s::bigint <= %(cap{i})s::bigint)"
        for i in range(4)
    )
    reserved = ", ".join(f"reserved_{name}" for name in _COUNTERS)
    amounts = ", ".join(f"%(amount{i})s::bigint" for i in range(4))
    update = ", ".join(
        f"reserved_{name} = b.reserved_{name} + excluded.reserved_{name}" for name in _COUNTERS
    )
    return (
        f"WITH b AS (INSERT INTO {s}.budgets AS b (budget, {reserved})"
        f" SELECT %(budget)s, {amounts} WHERE {fits_alone}"
        f" ON CONFLICT (budget) DO UPDATE SET {update} WHERE {fits_row} RETURNING b.budget)"
        f" INSERT INTO {s}.budget_holds (budget, hold, {', '.join(_COUNTERS)})"
        f" SELECT b.budget, %(hold)s, {amounts} FROM b"
    )


@cache  # one schema per store: made once
def _settle(s: str) -> str:
    update = ", ".join(
        f"reserved_{name} = b.reserved_{name} - h.{name},"
        f" spent_{name} = b.spent_{name} + %(spent{i})s::bigint"
        for i, name in enumerate(_COUNTERS)
    )
    return (
        f"WITH h AS (DELETE FROM {s}.budget_holds WHERE budget = %(budget)s AND hold = %(hold)s"
        f" RETURNING {', '.join(_COUNTERS)})"
        f" UPDATE {s}.budgets AS b SET {update} FROM h WHERE b.budget = %(budget)s"
    )


@cache  # one schema per store: made once
def _read(s: str) -> str:
    spent = ", ".join(f"spent_{name}" for name in _COUNTERS)
    reserved = ", ".join(f"reserved_{name}" for name in _COUNTERS)
    return (
        f"SELECT {spent}, {reserved}, (SELECT count(*) FROM {s}.budget_holds AS h"
        f" WHERE h.budget = b.budget) FROM {s}.budgets AS b WHERE b.budget = %(budget)s"
    )


def reserve(
    conn: Connection, s: str, budget: str, hold: str, amount: Counts, caps: Caps
) -> BudgetTotals | None:
    """Hold ``amount`` if it fits (see `BudgetStore.reserve_budget`): one statement."""
    params: dict[str, object] = {"budget": budget, "hold": hold}
    for index in range(4):
        params[f"amount{index}"] = amount[index]
        params[f"cap{index}"] = caps[index]
    if conn.execute(_reserve(s), params).rowcount == 1:
        return None
    return read(conn, s, budget)


def settle(conn: Connection, s: str, budget: str, hold: str, spent: Counts) -> bool:
    """End a hold (see `BudgetStore.settle_budget`): one statement."""
    params: dict[str, object] = {"budget": budget, "hold": hold}
    for index in range(4):
        params[f"spent{index}"] = spent[index]
    return bool(conn.execute(_settle(s), params).rowcount == 1)


def read(conn: Connection, s: str, budget: str) -> BudgetTotals:
    """The budget's totals (zeros for one never seen)."""
    row = conn.execute(_read(s), {"budget": budget}).fetchone()
    if row is None:
        return BudgetTotals()
    return BudgetTotals(tuple(row[0:4]), tuple(row[4:8]), int(row[8]))
