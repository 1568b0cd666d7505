"""What crosses between the driver and the agent hosts, and the checks before it does.

Ray copies every argument by pickling it (``cloudpickle``: functions and classes defined in
``__main__`` travel by value, everything importable by reference). Agent specs, a
``tool_context`` and a store recipe must pickle; `check_travels` says what did not, before
anything starts. Errors travel as values (`portable_error`): an exception whose class cannot be
rebuilt from its pickle becomes the nearest class of the library's tree that can.
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from actors.context._result import RunResult
from actors.context._usage import Usage
from actors.exceptions import ActorsError, RunFailedError, WireError
from actors.host import ApprovalHandler
from actors.store._memory import MemoryStore
from actors.store._protocol import SessionStore
from actors.store._sqlite import Durability, SQLiteStore

__all__ = [
    "ChildEnd",
    "Missing",
    "Outcome",
    "RootInfo",
    "StoreRecipe",
    "Taken",
    "TreeSeed",
    "WireReply",
    "check_travels",
    "portable_error",
]


def _dumps(value: Any) -> bytes:
    from ray import cloudpickle

    data: bytes = cloudpickle.dumps(value)  # type: ignore[no-untyped-call]
    return data


def _culprit(value: Any, where: str, depth: int = 0) -> str | None:
    """The path of the first part of ``value`` that does not pickle (a few levels deep)."""
    if depth > 4:
        return None
    parts: list[tuple[str, Any]] = []
    if isinstance(value, Mapping):
        parts = [(f"{where}[{k!r}]", v) for k, v in value.items()]
    elif isinstance(value, list | tuple | set | frozenset):
        parts = [(f"{where}[{i}]", v) for i, v in enumerate(value)]
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        parts = [(f"{where}.{f.name}", getattr(value, f.name)) for f in dataclasses.fields(value)]
    elif hasattr(value, "__dict__") and not isinstance(value, type):
        parts = [(f"{where}.{k}", v) for k, v in vars(value).items()]
    for path, part in parts:
        try:
            _dumps(part)
        except Exception:
            return _culprit(part, path, depth + 1) or f"{path} ({type(part).__name__})"
    return None


def check_travels(value: Any, what: str, hint: str) -> None:
    """Raise `WireError` unless ``value`` pickles the way Ray will pickle it.

    Args:
        value: The value that must reach another process.
        what: What it is, for the message (``"tool_context"``, ``"agent 'lead'"``).
        hint: What to do instead.
    """
    try:
        _dumps(value)
    except Exception as exc:
        where = _culprit(value, what) or f"{what} ({type(value).__name__})"
        raise WireError(
            f"{what} cannot travel to an agent host: {where} cannot be pickled "
            f"({type(exc).__name__}: {exc}); {hint}"
        ) from exc


def portable_error(error: BaseException | None) -> BaseException | None:
    """``error``, or a stand-in of the library's tree that survives a pickle round trip."""
    if error is None:
        return None
    try:
        copy = pickle.loads(pickle.dumps(error))
        if type(copy) is type(error):
            return error
    except Exception:
        pass
    for cls in type(error).__mro__:
        if not (isinstance(cls, type) and issubclass(cls, ActorsError)):
            continue
        try:
            stand_in = cls(f"{type(error).__name__}: {error}")
            pickle.loads(pickle.dumps(stand_in))
        except Exception:
            continue
        for name in ("messages", "usage", "agent_id"):
            if hasattr(error, name):
                setattr(stand_in, name, getattr(error, name))
        return stand_in
    return RunFailedError(f"{type(error).__name__}: {error}")


# -- stores -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StoreRecipe:
    """How each host opens the shared store: a SQLite file, or a factory.

    Attributes:
        key: Tells stores apart (hosts open each store once).
        path: The SQLite file, for a `SQLiteStore`.
        durability: Its durability mode.
        factory: A picklable callable returning a `SessionStore` (e.g. a PostgresStore).
    """

    key: str
    path: str | None = None
    durability: Durability = "batch"
    factory: Callable[[], SessionStore] | None = None

    @classmethod
    def of(cls, store: SessionStore | Callable[[], SessionStore]) -> StoreRecipe:
        """The recipe for a store given to `RayRuntime`.

        Raises:
            WireError: the store cannot be opened by another process.
        """
        if isinstance(store, SQLiteStore):
            return cls(
                key=f"sqlite:{store.path.resolve()}",
                path=str(store.path.resolve()),
                durability=store.durability,
            )
        if isinstance(store, MemoryStore):
            raise WireError(
                "a MemoryStore lives in one process, and agent hosts are processes of their "
                "own: use a SQLiteStore (hosts on one machine) or a store every host reaches"
            )
        if isinstance(store, SessionStore):
            check_travels(
                store,
                f"store {type(store).__name__}",
                "pass a factory that opens it on each host: store=lambda: MyStore(...)",
            )
            return cls(key=f"pickled:{id(store)}", factory=_Pickled(store))
        if callable(store):
            check_travels(store, "store factory", "use a module-level function or a lambda")
            return cls(key=f"factory:{id(store)}", factory=store)
        raise WireError(
            f"RayRuntime needs a SessionStore or a function returning one, got "
            f"{type(store).__name__}"
        )

    def open(self) -> SessionStore:
        """Open the store in this process."""
        if self.path is not None:
            return SQLiteStore(self.path, durability=self.durability)
        assert self.factory is not None
        store = self.factory()
        if not isinstance(store, SessionStore):
            raise WireError(f"the store factory returned {type(store).__name__}, not a store")
        return store


@dataclass(frozen=True, slots=True)
class _Pickled:
    """A store that travels as itself (its class knows how to pickle)."""

    store: SessionStore

    def __call__(self) -> SessionStore:
        return self.store


# -- what a host needs to run a tree's agents ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class TreeSeed:
    """What every agent of one tree shares, as it travels to a host.

    Attributes:
        store: The store's recipe, or None for a tree without one.
        session_id: The session in the store.
        tool_context: The tree's ``tool_context`` as the caller gave it (the host's
            ``tool_context_factory`` turns it into what tools see there).
        approval_handler: The tree's in-process approval handler, or None.
        narrowed: Whether ``tool_context`` is what a `Subagent`'s ``tool_context`` function
            made of its parent's: it is used as it arrived, never given to the factory.
    """

    store: StoreRecipe | None
    session_id: str | None
    tool_context: Any = dataclasses.field(repr=False)
    approval_handler: ApprovalHandler | None = None
    narrowed: bool = False


@dataclass(frozen=True, slots=True)
class WireReply:
    """Who waits for a child's run on its parent's host, as the child's host sees it.

    Attributes:
        token: The waiting call on the parent's host.
        kind: A subagent call of the parent's model, or a tool's ``ctx.delegate``.
        parent_id: The parent.
        child_id: The child.
        run_id: The parent's run (subagent calls).
        call_id: The parent's tool call (subagent calls).
    """

    token: str
    kind: Literal["parent", "delegate"]
    parent_id: str
    child_id: str
    run_id: str = ""
    call_id: str = ""


@dataclass(frozen=True, slots=True)
class ChildEnd:
    """How a child's run ended, sent back to the parent's host as the call's result."""

    result: RunResult[Any] | None
    error: BaseException | None
    tree_usage: Usage
    events: tuple[Any, ...] = ()  # the child's stream events not sent yet


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a host answers the driver: a value, or an error (never raised through Ray)."""

    value: Any = None
    error: BaseException | None = None

    def get(self) -> Any:
        """The value, or raise the error."""
        if self.error is not None:
            raise self.error
        return self.value


@dataclass(frozen=True, slots=True)
class Missing:
    """The host does not hold the agent (it was restarted since, or the agent stopped).

    ``restarted``: the host was restarted since it started, so the agent may come back (its
    session restored there) even though it is not here now.
    """

    agent_id: str
    restarted: bool = False


@dataclass(frozen=True, slots=True)
class Taken:
    """The host took an input of a lane; what it starts ends in the outbox of its key."""


@dataclass(frozen=True, slots=True)
class RootInfo:
    """A root agent a host started or restored."""

    agent_id: str
    name: str
    session_id: str | None
