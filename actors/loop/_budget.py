"""Budgets for a tree: a ledger every agent of the tree reserves against before a request.

A `Budget` given at spawn (``runtime.spawn(agent, budget=...)``) or on an `Agent` covers the
agent and every descendant. Before each model request the loop reserves the request's worst
case (its counted input, its ``max_tokens`` out, at the model's price) on the `Ledger` the
host gave it; a reservation that does not fit fails the run with `BudgetExceeded` and nothing
is sent. The reply settles the reservation at what the provider reported. Both are logged
(in the request's ``request_header`` and its reply's ``step_end``: ``budget``), so a restore
rebuilds the ledger from the tree's logs and counts a reservation whose reply never came as
spent: what providers report never passes the budget, whatever crashed. A settlement that has
no ``step_end`` to ride on (a late reply, a request never sent) is a ``budget_settled`` event;
logs of the first format, with ``budget_reserved`` events, read the same.

The loop's side (one agent's reservations, the input estimate) is `actors.loop._reservation`;
hosts make the ledgers here (`ledger_for`) and rebuild them on restore from what the logs
say (`actors.loop._budget_log`).

A budget with a ``shared`` name is kept in the tree's store as well (a row that every process
using that store and name draws on, see `actors.store._budgets`): its ledger reserves there
after the in-process ledgers of its chain, all or nothing, under a hold named in the
request's ``request_header``; the settlement names the hold again, so a restore settles in the
store the holds its logs leave open (at their worst case), once.
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from collections.abc import Iterator
from decimal import Decimal
from typing import Any, NamedTuple, Protocol

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveInt,
)

from actors._logging import get_logger
from actors.exceptions import UserError
from actors.models._prices import NANO, Price, Rates

__all__ = [
    "ZERO",
    "Amount",
    "Budget",
    "BudgetBook",
    "Ledger",
    "check_budget",
    "ledger_for",
]

_log = get_logger("actors.budget")


class Budget(BaseModel):
    """What a tree of agents may spend, all of it together; None means no cap.

    Given at spawn (``runtime.spawn(agent, budget=...)``) or on an `Agent` (then it covers that
    agent and its descendants, inside any budget above it), it holds across every descendant.
    Each request reserves its worst case first; one that does not fit fails its run with
    `actors.exceptions.BudgetExceeded`, and nothing is sent.

    Attributes:
        usd: US dollars, priced by ``prices`` or by ``genai-prices`` (``actors[prices]``).
        input_tokens: Input tokens, as providers report them.
        output_tokens: Output tokens.
        requests: Model requests.
        prices: Prices by model name (``"openai:gpt-4o-mini"`` or ``"gpt-4o-mini"``); they
            win over ``genai-prices``.
        max_tokens: The output worst case of a request whose settings give no ``max_tokens``,
            when the budget caps ``usd`` or ``output_tokens``: such a request is sent with it
            as its ``max_tokens``, so the worst case holds.
        shared: A name under which the budget is kept in the tree's store, so that every
            process (and every tree) whose budget has this name, on the same store, draws on
            one budget: the caps hold across them all. Needs a store that keeps budgets
            (`SQLiteStore`, `PostgresStore`, `MemoryStore`). None: the budget lives in the
            process, and holds for its tree there.

    Example:
        >>> Budget(usd=2, requests=100).requests
        100
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    usd: Decimal | None = Field(default=None, ge=0)
    input_tokens: NonNegativeInt | None = None
    output_tokens: NonNegativeInt | None = None
    requests: NonNegativeInt | None = None
    prices: dict[str, Price] = Field(default_factory=dict)
    max_tokens: PositiveInt = 4096
    shared: str | None = Field(default=None, min_length=1, max_length=200, pattern=r"^[^\x00]+$")


class BudgetBook(Protocol):
    """Where a shared budget is kept: a store's `actors.store.BudgetStore` methods."""

    def reserve_budget(
        self,
        budget: str,
        hold: str,
        amount: tuple[int, int, int, int],
        caps: tuple[int | None, int | None, int | None, int | None],
    ) -> Any:
        """Hold ``amount`` if it fits: None, or the budget's totals (with ``used``)."""
        ...

    def settle_budget(self, budget: str, hold: str, spent: tuple[int, int, int, int]) -> bool:
        """End a hold, counting ``spent``; False when it was settled already."""
        ...


class Amount(NamedTuple):
    """An amount of a budget: requests, tokens in and out, and money in nano-dollars."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    nano_usd: int = 0

    def plus(self, other: Amount) -> Amount:
        """This amount and ``other`` (``+`` would join the tuples)."""
        return Amount(
            self.requests + other.requests,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.nano_usd + other.nano_usd,
        )

    def minus(self, other: Amount) -> Amount:
        """This amount less ``other``."""
        return Amount(
            self.requests - other.requests,
            self.input_tokens - other.input_tokens,
            self.output_tokens - other.output_tokens,
            self.nano_usd - other.nano_usd,
        )

    @property
    def usd(self) -> Decimal:
        """The money, in dollars."""
        return Decimal(self.nano_usd) / NANO

    def to_json(self) -> dict[str, int]:
        """The amount as a logged event's data."""
        return self._asdict()

    @classmethod
    def from_json(cls, data: Any) -> Amount:
        """The amount a logged event holds (missing fields are 0)."""
        if not isinstance(data, dict):
            return ZERO
        return cls(*(int(data.get(name, 0)) for name in cls._fields))


ZERO = Amount()
_NAMES = ("requests", "input_tokens", "output_tokens", "usd")


class Ledger:
    """What a tree (or a subtree with a budget of its own) has spent and holds reserved.

    Shared by every agent under it in one process; a nested ledger reserves in its parents
    too, all or nothing, under the one lock of its root. Amounts are (requests, input tokens,
    output tokens, nano-dollars), as in `Amount`.

    Only a reservation takes the lock: a settlement is queued (a deque's append is atomic) and
    counted by the next reservation, or read, of any ledger of the tree, before it decides.
    Whoever decides sees every settlement made before it, as if each had taken the lock.

    A shared budget's ledger has a ``book`` (its store): its caps are checked there, against
    what every process holds and spent (`reserve_held`), and its own counters only say what
    this process's part of the tree did.
    """

    __slots__ = (
        "_capped",
        "_caps",
        "_chain",
        "_reserved",
        "_settled",
        "_spent",
        "_stored",
        "_unsettled",
        "book",
        "bounds_reply",
        "budget",
        "in_dollars",
        "lock",
        "parent",
        "prices",
        "rates",
        "stored",
    )

    def __init__(
        self, budget: Budget, parent: Ledger | None = None, book: BudgetBook | None = None
    ) -> None:
        self.budget = budget
        self.parent = parent
        self.book = book if budget.shared is not None else None
        self.lock: threading.Lock = parent.lock if parent is not None else threading.Lock()
        # Settlements not counted yet, for the whole tree (shared like the lock): each holds
        # the chain it applies to, what it had reserved and what it spent.
        self._settled: deque[tuple[tuple[Ledger, ...], tuple[int, ...], tuple[int, ...]]] = (
            parent._settled if parent is not None else deque()
        )
        # Counters changed in place under the lock (a hot path: two changes per request).
        self._spent = [0, 0, 0, 0]
        self._reserved = [0, 0, 0, 0]
        usd = None if budget.usd is None else int(budget.usd * NANO)
        self._caps = (budget.requests, budget.input_tokens, budget.output_tokens, usd)
        self._chain: tuple[Ledger, ...] = (self, *(parent._chain if parent else ()))
        # The ledgers whose caps are checked here; a shared one's are checked in its store.
        self._capped = tuple(ledger for ledger in self._chain if ledger.book is None)
        self._stored = tuple(ledger for ledger in self._chain if ledger.book is not None)
        names = [ledger.budget.shared for ledger in self._stored]
        if len(set(names)) < len(names):
            raise UserError(
                f"the shared budget {budget.shared!r} is nested in itself; give the inner "
                "budget another name, or none"
            )
        # Whether a request's reservation goes to a store too (then it needs a hold name).
        self.stored: bool = bool(self._stored)
        # Settlements the store could not take (it was unreachable): tried again before the
        # next reservation. Until then the store counts them at their worst case.
        self._unsettled: deque[tuple[str, tuple[int, int, int, int]]] = deque()
        # The nearest budget's price of a model wins.
        self.prices: dict[str, Price] = {**(parent.prices if parent else {}), **budget.prices}
        # Rates by model name, shared by the tree's agents; the budget's own when its prices
        # are all there is (nothing above it adds any).
        self.rates: dict[str, Rates | None] = (
            _rates_of(budget) if parent is None or not parent.prices else {}
        )
        # Known once (a chain never changes): whether any budget of it caps money, and whether
        # a request's reply needs a bound (money or output tokens are capped).
        self.in_dollars: bool = usd is not None or (parent is not None and parent.in_dollars)
        self.bounds_reply: bool = (
            self.in_dollars
            or budget.output_tokens is not None
            or (parent is not None and parent.bounds_reply)
        )

    @property
    def spent(self) -> Amount:
        """What the requests under this ledger were reported to spend (or held when lost)."""
        with self.lock:
            self._count_settled()
            return Amount(*self._spent)

    @property
    def reserved(self) -> Amount:
        """What requests in flight under this ledger hold."""
        with self.lock:
            self._count_settled()
            return Amount(*self._reserved)

    def chain(self) -> Iterator[Ledger]:
        """This ledger, then the ones it nests in, up to the tree's."""
        return iter(self._chain)

    def reserve(self, amount: tuple[int, int, int, int]) -> str | None:
        """Hold ``amount`` in every ledger of the chain, or none; a refusal says why."""
        with self.lock:
            if self._settled:
                self._count_settled()
            for ledger in self._capped:
                caps, spent, held = ledger._caps, ledger._spent, ledger._reserved
                for index in (0, 1, 2, 3):
                    cap = caps[index]
                    if cap is not None and spent[index] + held[index] + amount[index] > cap:
                        return ledger._refusal(index, amount)
            for ledger in self._chain:
                held = ledger._reserved
                held[0] += amount[0]
                held[1] += amount[1]
                held[2] += amount[2]
                held[3] += amount[3]
        return None

    def reserve_held(self, amount: tuple[int, int, int, int], hold: str) -> str | None:
        """`reserve`, and in the store of every shared budget of the chain, as ``hold``.

        All or nothing: a refusal, or a store that fails, undoes what was held.

        Raises:
            Exception: A store failed (its `StoreError`); nothing stays held, or, when even
                the undoing failed, the store counts the hold at its worst case.
        """
        problem = self.reserve(amount)
        if problem is not None:
            return problem
        made: list[Ledger] = []
        try:
            for ledger in self._stored:
                ledger.retry_unsettled()
                book, name = ledger.book, ledger.budget.shared
                assert book is not None
                assert name is not None
                made.append(ledger)  # a failed call may have made the hold: undo it too
                totals = book.reserve_budget(name, hold, amount, ledger._caps)
                if totals is not None:
                    made.pop()
                    problem = ledger._refusal(
                        ledger._first_over(totals.used, amount), amount, totals.used
                    )
                    break
        except BaseException:
            self._undo(made, hold, amount)
            raise
        if problem is not None:
            self._undo(made, hold, amount)
        return problem

    def _undo(self, made: list[Ledger], hold: str, amount: tuple[int, int, int, int]) -> None:
        self.settle(amount, ZERO)
        for ledger in made:
            ledger.settle_stored(hold, ZERO)

    def _first_over(self, used: tuple[int, ...], amount: tuple[int, ...]) -> int:
        for index in (0, 1, 2, 3):
            cap = self._caps[index]
            if cap is not None and used[index] + amount[index] > cap:
                return index
        # The store saw more than it reported: name the first capped counter.
        return next(index for index in (0, 1, 2, 3) if self._caps[index] is not None)

    def settle_held(
        self, reserved: tuple[int, ...], spent: tuple[int, int, int, int], hold: str
    ) -> bool:
        """`settle`, and end ``hold`` in the stores of the chain; False when one failed.

        A failed store settlement is tried again before the next reservation; until then,
        and for a restore that finds it marked in the log, the store counts its worst case.
        """
        self.settle(reserved, spent)
        done = True
        for ledger in self._stored:
            done = ledger.settle_stored(hold, spent) and done
        return done

    def settle_stored_chain(self, hold: str, spent: tuple[int, int, int, int]) -> None:
        """End ``hold`` in the store of every shared budget of the chain (a restore's)."""
        for ledger in self._stored:
            ledger.settle_stored(hold, spent)

    def settle_stored(self, hold: str, spent: tuple[int, int, int, int]) -> bool:
        """End ``hold`` in this shared ledger's store (a restore's too); False when it failed."""
        book, name = self.book, self.budget.shared
        if book is None or name is None:
            return True
        try:
            book.settle_budget(name, hold, spent)
        except Exception as exc:
            self._unsettled.append((hold, spent))
            _log.warning(
                "a shared budget's store could not settle a hold; it stays counted at its "
                "worst case until settled",
                budget=name,
                hold=hold,
                error=f"{type(exc).__name__}: {exc}",
            )
            return False
        return True

    def retry_unsettled(self) -> None:
        """Try again the settlements the store could not take."""
        book, name, queue = self.book, self.budget.shared, self._unsettled
        while queue and book is not None and name is not None:
            hold, spent = queue[0]
            book.settle_budget(name, hold, spent)  # raises: the reservation fails, typed
            queue.popleft()

    def settle(self, reserved: tuple[int, ...], spent: tuple[int, ...]) -> None:
        """A reservation ended: release it, and count what was really spent.

        Queued, without the lock: the next reservation or read of the tree counts it first.
        """
        self._settled.append((self._chain, reserved, spent))

    def _count_settled(self) -> None:
        # Under the lock. popleft is atomic: a settlement queued meanwhile is counted by this
        # loop or by the next one, never twice.
        queue = self._settled
        while queue:
            chain, reserved, spent = queue.popleft()
            for ledger in chain:
                held, used = ledger._reserved, ledger._spent
                for index in (0, 1, 2, 3):
                    held[index] -= reserved[index]
                    used[index] += spent[index]

    def charge(self, spent: tuple[int, ...]) -> None:
        """Count ``spent`` (a restore, from the logs) in every ledger of the chain."""
        self.settle(ZERO, spent)

    def _refusal(
        self, index: int, amount: tuple[int, ...], used: tuple[int, ...] | None = None
    ) -> str:
        # Under the lock, settlements counted (or ``used``: what a shared budget's store holds).
        left = self._caps[index]
        assert left is not None
        left -= self._spent[index] + self._reserved[index] if used is None else used[index]
        name = "budget" if self.budget.shared is None else f"shared budget {self.budget.shared!r}"
        if index == 3:
            return (
                f"{name} usd={self.budget.usd} has ${Decimal(left) / NANO} left, and this "
                f"request may cost up to ${Decimal(amount[3]) / NANO}"
            )
        return (
            f"{name} {_NAMES[index]}={self._caps[index]} has {left} left, and this request "
            f"needs up to {amount[index]}"
        )

    def __repr__(self) -> str:
        return f"<Ledger spent={tuple(self.spent)} reserved={tuple(self.reserved)}>"


# Rates by model name for each live budget (by id), as its prices or genai-prices give them:
# looked up once for every ledger made of that budget (a fresh tree per run shares them). Not
# kept on the budget: pydantic compares private attributes, and two equal budgets must stay so.
_RATES: dict[int, dict[str, Rates | None]] = {}


def _rates_of(budget: Budget) -> dict[str, Rates | None]:
    rates = _RATES.get(id(budget))
    if rates is None:
        rates = _RATES[id(budget)] = {}
        weakref.finalize(budget, _RATES.pop, id(budget), None)  # forgotten with the budget
    return rates


def check_budget(budget: object) -> Budget | None:
    """``budget`` if it is a `Budget` or None; a `UserError` saying what it was otherwise."""
    if budget is None or isinstance(budget, Budget):
        return budget
    raise UserError(
        f"budget must be a Budget (e.g. Budget(usd=5)) or None, got {type(budget).__name__}"
    )


def ledger_for(parent: Ledger | None, budget: Budget | None, store: object = None) -> Ledger | None:
    """The ledger of an agent: its parent's, nested under a budget of its own if it has one.

    ``store`` is the tree's: a shared budget (``Budget(shared=...)``) is kept there.

    Raises:
        UserError: A shared budget, and a store that keeps no budgets (or none).
    """
    if budget is None:
        return parent
    if budget.shared is None:
        return Ledger(budget, parent)
    if not all(
        callable(getattr(store, name, None))
        for name in ("reserve_budget", "settle_budget", "read_budget")
    ):
        where = "no store" if store is None else f"a {type(store).__name__}, which keeps none"
        raise UserError(
            f"Budget(shared={budget.shared!r}) is kept in the tree's store, and the tree has "
            f"{where}; spawn it with a store=SQLiteStore(path) or PostgresStore(dsn) shared "
            "by the processes, or drop shared= for a budget of this process only"
        )
    return Ledger(budget, parent, store)  # type: ignore[arg-type]
