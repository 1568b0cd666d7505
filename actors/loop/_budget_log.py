"""What an agent's log says of its budget: the budget given at spawn, what it spent, what it holds.

A restore rebuilds a tree's ledgers from these (see `actors.loop._budget`): `budget_of` (the
budget a root was spawned with), `spend_of` (what an agent spent, a reservation never
settled counting as spent) and `open_holds` (the holds of shared budgets its log leaves open
in their store).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from actors.exceptions import SerializationError
from actors.loop._budget import ZERO, Amount, Budget

if TYPE_CHECKING:
    from actors.context._events import Event

__all__ = ["budget_of", "open_holds", "spend_of"]


def open_holds(events: Iterable[Event]) -> list[tuple[str, tuple[int, int, int, int]]]:
    """The holds of shared budgets that one agent's log leaves open in their store.

    A hold reserved and never settled, with its reservation (a restore counts it as spent);
    and one settled in the log whose store did not take it (``"stored": false``), with what
    it spent. Settling either in the store again is harmless: a hold is settled once.
    """
    open_: dict[str, tuple[int, int, int, int]] = {}
    for event in events:
        kind = event.type
        if kind == "request_header" or kind == "budget_reserved":
            data = event.data.get("budget") if kind == "request_header" else event.data
            if isinstance(data, dict) and isinstance(data.get("hold"), str):
                open_[data["hold"]] = tuple(Amount.from_json(data))  # type: ignore[assignment]
        elif kind == "step_end" or kind == "budget_settled":
            data = event.data.get("budget") if kind == "step_end" else event.data
            if isinstance(data, dict) and isinstance(data.get("hold"), str):
                if data.get("stored", True):
                    open_.pop(data["hold"], None)
                else:
                    open_[data["hold"]] = tuple(Amount.from_json(data.get("spent")))  # type: ignore[assignment]
    return list(open_.items())


def spend_of(events: Iterable[Event]) -> Amount:
    """What one agent's log says it spent, counting a reservation never settled as spent.

    A reservation is a ``request_header``'s ``budget`` (or, in logs of the first format, a
    ``budget_reserved`` event); a settlement is a ``step_end``'s ``budget`` or a
    ``budget_settled`` event: ``{"reserved": ..., "spent": ...}``.
    """
    total = ZERO
    for event in events:
        kind = event.type
        if kind == "request_header":
            if "budget" in event.data:
                total = total.plus(Amount.from_json(event.data["budget"]))
        elif kind == "step_end":
            if "budget" in event.data:
                total = _settled(total, event.data["budget"])
        elif kind == "budget_reserved":
            total = total.plus(Amount.from_json(event.data))
        elif kind == "budget_settled":
            total = _settled(total, event.data)
    return total


def _settled(total: Amount, data: Any) -> Amount:
    if not isinstance(data, dict):
        return total
    spent, reserved = Amount.from_json(data.get("spent")), Amount.from_json(data.get("reserved"))
    return total.plus(spent).minus(reserved)


def budget_of(events: Iterable[Event]) -> Budget | None:
    """The budget a root was spawned with, as its log holds it (``budget_set``), or None.

    Raises:
        SerializationError: the log's budget cannot be read (the log is damaged).
    """
    found: Budget | None = None
    for event in events:
        if event.type == "budget_set":
            try:
                found = Budget.model_validate(event.data["budget"])
            except ValidationError as exc:
                raise SerializationError(
                    f"event {event.seq} (budget_set) holds no budget that can be read: "
                    f"{exc.errors()[0].get('msg')}"
                ) from None
    return found
