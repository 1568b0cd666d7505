"""Budgets kept in a store: `BudgetStore`, the optional capability a shared budget needs.

A budget that several processes share (``Budget(shared="team-a")``) is one row of the store:
what its holders reserved and what they spent, as four counters (requests, input tokens,
output tokens, nano-dollars), changed atomically. A request reserves its worst case as a
*hold* (`BudgetStore.reserve_budget`: one conditional change, all or nothing) and its reply
ends the hold (`BudgetStore.settle_budget`: the hold is released and what was spent is
counted). A hold is settled once: settling it again changes nothing, so a restore may settle
whatever its logs leave open without counting anything twice.

The caps are not kept in the row: each reservation brings the caps of the budget it is made
under and fits against the row's totals, so the row is only what was spent and held.

`MemoryBudgets` is the implementation of `MemoryStore`; `SQLiteStore` and `PostgresStore`
keep the rows in their ``budgets`` and ``budget_holds`` tables.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeGuard, runtime_checkable

from actors.exceptions import UserError
from actors.store._batch import check_id

__all__ = [
    "BudgetStore",
    "BudgetTotals",
    "Caps",
    "Counts",
    "MemoryBudgets",
    "check_reservation",
    "check_settlement",
    "fits",
    "keeps_budgets",
]

Counts = tuple[int, int, int, int]
"""Requests, input tokens, output tokens, nano-dollars."""

Caps = tuple[int | None, int | None, int | None, int | None]
"""The caps of `Counts`, each None when that counter has none."""

_ZERO: Counts = (0, 0, 0, 0)


@dataclass(frozen=True, slots=True)
class BudgetTotals:
    """A shared budget as its store holds it.

    Attributes:
        spent: What settled holds spent (requests, input tokens, output tokens, nano-dollars).
        reserved: What the holds still open reserved.
        holds: How many holds are open.
    """

    spent: Counts = _ZERO
    reserved: Counts = _ZERO
    holds: int = 0

    @property
    def used(self) -> Counts:
        """Spent and reserved together: what a new reservation must fit beside."""
        s, r = self.spent, self.reserved
        return (s[0] + r[0], s[1] + r[1], s[2] + r[2], s[3] + r[3])


@runtime_checkable
class BudgetStore(Protocol):
    """A store that keeps shared budgets: the optional capability ``Budget(shared=...)`` uses.

    Every method is atomic and safe to call from many threads and processes at once; every
    error is a `StoreError` (or a `UserError` for an argument that cannot be used). The
    built-in stores implement it; `actors.store.conformance.StoreConformance` tests it.
    """

    def reserve_budget(
        self, budget: str, hold: str, amount: Counts, caps: Caps
    ) -> BudgetTotals | None:
        """Hold ``amount`` on ``budget`` if it fits under every cap; all or nothing.

        A counter fits when its cap is None or spent + reserved + amount <= cap. A budget
        never seen starts at zero.

        Args:
            budget: The budget's name.
            hold: A name for the hold, new for this budget (the settlement names it).
            amount: The worst case to hold.
            caps: The caps to fit under.

        Returns:
            None when the hold was made; else the budget's totals (nothing was changed).

        Raises:
            StoreError: The store failed; the hold may or may not have been made (settling
                it is always safe).
            UserError: An empty name, or counts that are not four ints >= 0.
        """
        ...

    def settle_budget(self, budget: str, hold: str, spent: Counts) -> bool:
        """End a hold: release what it reserved and count ``spent`` as spent.

        Returns:
            True; False when the budget has no such open hold (settled before, or never
            made), and then nothing changed.

        Raises:
            StoreError: The store failed; settling again is safe.
            UserError: An empty name, or counts that are not four ints >= 0.
        """
        ...

    def read_budget(self, budget: str) -> BudgetTotals:
        """The budget's totals (zeros for a budget never seen)."""
        ...


def keeps_budgets(store: object) -> TypeGuard[BudgetStore]:
    """Whether ``store`` offers the `BudgetStore` methods."""
    return all(
        callable(getattr(store, name, None))
        for name in ("reserve_budget", "settle_budget", "read_budget")
    )


def _check_counts(label: str, counts: object, *, caps: bool = False) -> None:
    if (
        not isinstance(counts, Sequence)
        or len(counts) != 4
        or not all(
            (caps and value is None)
            or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)
            for value in counts
        )
    ):
        kind = "ints >= 0 or None" if caps else "ints >= 0"
        raise UserError(
            f"{label} must be four {kind} (requests, input tokens, output tokens, "
            f"nano-dollars), got {counts!r}"
        )


def check_reservation(budget: object, hold: object, amount: object, caps: object) -> None:
    """Check `BudgetStore.reserve_budget`'s arguments; `UserError` saying what is wrong."""
    check_id("budget", budget)
    check_id("hold", hold)
    _check_counts("amount", amount)
    _check_counts("caps", caps, caps=True)


def check_settlement(budget: object, hold: object, spent: object) -> None:
    """Check `BudgetStore.settle_budget`'s arguments; `UserError` saying what is wrong."""
    check_id("budget", budget)
    check_id("hold", hold)
    _check_counts("spent", spent)


def fits(used: Sequence[int], amount: Sequence[int], caps: Caps) -> bool:
    """Whether ``amount`` fits beside ``used`` under every cap."""
    return all(
        cap is None or use + more <= cap for use, more, cap in zip(used, amount, caps, strict=True)
    )


@dataclass
class _Row:
    spent: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    reserved: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    holds: dict[str, Counts] = field(default_factory=dict)

    def totals(self) -> BudgetTotals:
        spent, reserved = self.spent, self.reserved
        return BudgetTotals(
            (spent[0], spent[1], spent[2], spent[3]),
            (reserved[0], reserved[1], reserved[2], reserved[3]),
            len(self.holds),
        )


class MemoryBudgets:
    """Shared budgets in a process's memory (what `MemoryStore` and its siblings share)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[str, _Row] = {}

    def reserve(self, budget: str, hold: str, amount: Counts, caps: Caps) -> BudgetTotals | None:
        """See `BudgetStore.reserve_budget` (arguments checked)."""
        with self._lock:
            row = self._rows.setdefault(budget, _Row())
            if hold in row.holds:
                raise UserError(f"budget {budget!r} holds {hold!r} already; name a new hold")
            totals = row.totals()
            if not fits(totals.used, amount, caps):
                return totals
            row.holds[hold] = tuple(amount)  # type: ignore[assignment]
            for index in range(4):
                row.reserved[index] += amount[index]
            return None

    def settle(self, budget: str, hold: str, spent: Counts) -> bool:
        """See `BudgetStore.settle_budget` (arguments checked)."""
        with self._lock:
            row = self._rows.get(budget)
            held = row.holds.pop(hold, None) if row is not None else None
            if row is None or held is None:
                return False
            for index in range(4):
                row.reserved[index] -= held[index]
                row.spent[index] += spent[index]
            return True

    def read(self, budget: str) -> BudgetTotals:
        """See `BudgetStore.read_budget`."""
        with self._lock:
            row = self._rows.get(budget)
            return BudgetTotals() if row is None else row.totals()
