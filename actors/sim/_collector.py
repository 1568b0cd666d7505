"""The cyclic garbage collector while simulations drive: what survives is set aside unscanned.

A simulation allocates millions of small objects that live long (its agents' logs) and, in
the framework's own loop, no garbage cycles at all (what dies is freed by reference counting).
The interpreter's young collections would scan each of those objects once, then again in the
older generations: a sixth of a 10,000-agent run even with a young generation of 50,000. While
any simulation of the process drives:

- the host looks between two messages (or world calls) at what was allocated since it last
  looked; past 50,000 objects it sets them aside (``gc.freeze``), without scanning them: never
  looked at by the young and middle collections;
- once what was set aside since the last full collection exceeds three times what was alive
  when last counted (the first time the process sets objects aside, after each full
  collection, and again when a drive starts on a heap half the size it was then), or four
  million objects, a full collection runs there: everything set aside is
  looked at, garbage cycles that died meanwhile are freed, the survivors are set aside again.
  A garbage cycle (a world's, or an exception's traceback) is kept at most that long, and the
  memory it holds is bounded by that: at most three times what is alive, or four million
  objects. Each object is scanned a bounded number of times (about 4/3 on average, as the
  budget grows geometrically); a 10,000-agent run of `bench.sim`, 3.3 million objects: never.
- a young collection that runs anyway (one message that allocates more than 500,000 objects, or
  an explicit ``gc.collect(0)``) frees the young garbage cycles and sets its survivors aside.

With the collector disabled (``gc.disable()``) nothing is set aside or collected. When the last
drive ends, the thresholds are put back and what was set aside joins the oldest
generation. An application that froze objects itself (``gc.freeze()`` before forking
workers) keeps its frozen objects frozen: then nothing is set aside, only the young
generation's threshold moves to 50,000. The state is the process's (the collector is), kept
under one lock, so simulations driven on several threads at once put it back once, when the
last one ends.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["quiet_collector", "set_aside", "state"]

SET_ASIDE_EVERY = 50_000  # objects allocated (net) between two looks that set them aside
SAFETY_THRESHOLD = 500_000  # the young generation's threshold while setting aside
YOUNG_THRESHOLD = 50_000  # the young generation's threshold when nothing can be set aside
FIRST_FULL = 4_000_000  # objects set aside (at most) before the first full collection
GROWTH = 4.0  # then one whenever what is set aside has grown this much since the last
_NEVER = 1 << 62


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0  # drives under way in this process
        self.thresholds: tuple[int, ...] = ()
        self.setting_aside = False  # the callback is installed (nothing was frozen before)
        self.every = _NEVER  # set aside once this many objects were allocated: read per message
        self.aside = 0  # objects set aside since the last full collection (net allocations)
        self.young = 0  # the young generation's size as its collection started
        self.budget = FIRST_FULL  # objects to set aside before the next full collection
        self.live: int | None = None  # objects alive when last counted (kept across drives)
        self.blocks = 0  # the allocator's blocks in use then: a heap that halved since recounts
        self.due = False  # a full collection should run before the next message


state = _State()
"""The process's: a host calls `set_aside` between two messages when ``gc.get_count()[0] >=
state.every`` or ``state.due``."""


def _around_collection(phase: str, info: dict[str, Any]) -> None:
    # A young collection that ran anyway: its survivors are set aside as the host would have.
    if phase == "start":
        state.young = gc.get_count()[0]
        return
    gc.freeze()
    state.aside += state.young
    if state.aside >= state.budget:
        state.due = True  # a collection cannot run from inside another one: at the next message


def set_aside() -> None:
    """Set aside what was allocated since the last look; run the full collection if it is due.

    Called by a simulation's host between two messages, never inside a collection.
    """
    with state.lock:
        if not state.setting_aside:
            state.due = False
            return
        if not gc.isenabled():  # gc.disable() is the caller's word: look again later
            state.due = False
            state.every = gc.get_count()[0] + SET_ASIDE_EVERY
            return
        state.every = SET_ASIDE_EVERY
        state.aside += gc.get_count()[0]
        gc.freeze()
        if state.live is None:  # counted (a walk) the first time, then at each full collection
            _count_live()
        if not state.due and state.aside < state.budget:
            return
        gc.unfreeze()
        gc.collect()  # its own end passes through _around_collection too
        gc.freeze()
        _count_live()
        state.aside = 0
        state.due = False


def _budget(live: int) -> int:
    return max(FIRST_FULL, int((GROWTH - 1) * live))


def _count_live() -> None:
    state.live = gc.get_freeze_count()  # walks them all
    state.blocks = sys.getallocatedblocks()
    state.budget = _budget(state.live)


@contextmanager
def quiet_collector() -> Iterator[None]:
    """Collect as described above while the block runs (re-entrant, thread-safe)."""
    _enter()
    try:
        yield
    finally:
        _leave()


def _enter() -> None:
    with state.lock:
        state.depth += 1
        if state.depth > 1:
            return
        state.thresholds = gc.get_threshold()
        young, *older = state.thresholds
        state.setting_aside = gc.get_freeze_count() == 0
        threshold = SAFETY_THRESHOLD if state.setting_aside else YOUNG_THRESHOLD
        gc.set_threshold(max(young, threshold), *older)
        state.aside, state.due = 0, False
        if state.live is not None and sys.getallocatedblocks() < state.blocks // 2:
            state.live = None  # what was alive then is mostly gone (an earlier simulation): recount
        state.budget = FIRST_FULL if state.live is None else _budget(state.live)
        state.every = SET_ASIDE_EVERY if state.setting_aside else _NEVER
        if state.setting_aside:
            gc.callbacks.append(_around_collection)


def _leave() -> None:
    with state.lock:
        state.depth -= 1
        if state.depth > 0:
            return
        if state.setting_aside:
            gc.callbacks.remove(_around_collection)
            gc.unfreeze()
            state.setting_aside = False
        state.due = False
        state.every = _NEVER
        gc.set_threshold(*state.thresholds)
