"""The conformance tests of shared budgets (`BudgetStore`), an optional capability.

A store that does not offer the `BudgetStore` methods skips them: ``Budget(shared=...)`` then
refuses it with a `UserError`.
"""

from __future__ import annotations

import threading

import pytest

from actors.exceptions import UserError
from actors.store._budgets import BudgetStore, BudgetTotals, keeps_budgets
from actors.store._conformance_base import ConformanceBase
from actors.store._protocol import SessionStore

__all__ = ["BudgetConformance"]

NO_CAPS = (None, None, None, None)


def _budgets(store: SessionStore) -> BudgetStore:
    if not keeps_budgets(store):
        pytest.skip(f"{type(store).__name__} keeps no shared budgets (an optional capability)")
    return store


class BudgetConformance(ConformanceBase):
    """Tests of shared budgets; part of `StoreConformance`."""

    def test_a_budget_never_seen_reads_as_zero(self, store: SessionStore) -> None:
        """Nothing spent, nothing held."""
        assert _budgets(store).read_budget("team") == BudgetTotals((0, 0, 0, 0), (0, 0, 0, 0), 0)

    def test_reserve_holds_until_the_caps_then_refuses(self, store: SessionStore) -> None:
        """A hold fits when spent + reserved + amount <= cap; a refusal changes nothing."""
        budgets = _budgets(store)
        caps = (3, 1000, None, None)
        assert budgets.reserve_budget("team", "h1", (1, 400, 50, 7), caps) is None
        assert budgets.reserve_budget("team", "h2", (1, 600, 50, 7), caps) is None
        refused = budgets.reserve_budget("team", "h3", (1, 1, 0, 0), caps)  # input tokens full
        assert refused == BudgetTotals((0, 0, 0, 0), (2, 1000, 100, 14), 2)
        assert refused.used == (2, 1000, 100, 14)
        assert budgets.read_budget("team") == refused
        assert budgets.reserve_budget("team", "h3", (1, 0, 0, 0), caps) is None  # fits exactly
        assert budgets.reserve_budget("team", "h4", (1, 0, 0, 0), caps) is not None  # requests
        assert budgets.read_budget("team").holds == 3

    def test_settle_releases_the_hold_and_counts_the_spend(self, store: SessionStore) -> None:
        """The reserved amount comes off, what was spent goes on; a second settle does nothing."""
        budgets = _budgets(store)
        budgets.reserve_budget("team", "h1", (1, 100, 200, 3000), NO_CAPS)
        budgets.reserve_budget("team", "h2", (1, 10, 20, 300), NO_CAPS)
        assert budgets.settle_budget("team", "h1", (1, 90, 12, 1500)) is True
        assert budgets.read_budget("team") == BudgetTotals((1, 90, 12, 1500), (1, 10, 20, 300), 1)
        assert budgets.settle_budget("team", "h1", (1, 90, 12, 1500)) is False  # once only
        assert budgets.settle_budget("team", "never", (1, 1, 1, 1)) is False
        assert budgets.settle_budget("other", "h2", (1, 1, 1, 1)) is False  # holds are per budget
        assert budgets.read_budget("team") == BudgetTotals((1, 90, 12, 1500), (1, 10, 20, 300), 1)

    def test_a_settled_hold_frees_room_for_the_next(self, store: SessionStore) -> None:
        """Spend below the worst case leaves the difference to later reservations."""
        budgets = _budgets(store)
        caps = (None, None, 100, None)
        assert budgets.reserve_budget("team", "h1", (1, 0, 100, 0), caps) is None
        assert budgets.reserve_budget("team", "h2", (1, 0, 40, 0), caps) is not None
        budgets.settle_budget("team", "h1", (1, 0, 60, 0))
        assert budgets.reserve_budget("team", "h2", (1, 0, 40, 0), caps) is None
        assert budgets.reserve_budget("team", "h3", (1, 0, 1, 0), caps) is not None

    def test_budgets_are_apart_by_name(self, store: SessionStore) -> None:
        """Two names, two budgets."""
        budgets = _budgets(store)
        budgets.reserve_budget("a", "h", (1, 0, 0, 0), (1, None, None, None))
        assert budgets.reserve_budget("b", "h", (1, 0, 0, 0), (1, None, None, None)) is None
        assert budgets.read_budget("a").reserved == budgets.read_budget("b").reserved

    def test_another_instance_shares_the_budget(
        self, store: SessionStore, peer: SessionStore
    ) -> None:
        """What one instance holds, another sees and fits beside; either may settle it."""
        first, second = _budgets(store), _budgets(peer)
        caps = (2, None, None, None)
        assert first.reserve_budget("team", "h1", (1, 0, 0, 0), caps) is None
        assert second.reserve_budget("team", "h2", (1, 0, 0, 0), caps) is None
        assert first.reserve_budget("team", "h3", (1, 0, 0, 0), caps) is not None
        assert second.settle_budget("team", "h1", (1, 5, 5, 5)) is True
        assert first.read_budget("team") == BudgetTotals((1, 5, 5, 5), (1, 0, 0, 0), 1)

    def test_concurrent_reservations_never_pass_a_cap(
        self, store: SessionStore, peer: SessionStore
    ) -> None:
        """Threads on two instances racing for 25 requests get exactly 25."""
        stores = (_budgets(store), _budgets(peer))
        granted: list[str] = []
        start = threading.Barrier(6)

        def ask(worker: int) -> None:
            start.wait()
            for n in range(8):
                hold = f"w{worker}-{n}"
                budgets = stores[worker % 2]
                if (
                    budgets.reserve_budget("team", hold, (1, 0, 0, 0), (25, None, None, None))
                    is None
                ):
                    granted.append(hold)

        threads = [threading.Thread(target=ask, args=(worker,)) for worker in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert len(granted) == 25
        assert stores[0].read_budget("team") == BudgetTotals((0, 0, 0, 0), (25, 0, 0, 0), 25)

    def test_budget_calls_refuse_bad_arguments(self, store: SessionStore) -> None:
        """Empty names and counts that are not four ints >= 0 are caller errors."""
        budgets = _budgets(store)
        with pytest.raises(UserError, match="budget"):
            budgets.reserve_budget("", "h", (1, 0, 0, 0), NO_CAPS)
        with pytest.raises(UserError, match="hold"):
            budgets.reserve_budget("team", "", (1, 0, 0, 0), NO_CAPS)
        with pytest.raises(UserError, match="amount"):
            budgets.reserve_budget("team", "h", (1, -1, 0, 0), NO_CAPS)
        with pytest.raises(UserError, match="caps"):
            budgets.reserve_budget("team", "h", (1, 0, 0, 0), (1, 2, 3))  # type: ignore[arg-type]
        with pytest.raises(UserError, match="spent"):
            budgets.settle_budget("team", "h", (1, 0, 0, True))
        assert budgets.read_budget("team").holds == 0
