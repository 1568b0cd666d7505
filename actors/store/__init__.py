"""Where the event logs of agent trees persist: `SessionStore` and its implementations.

A session is one agent tree: its agents (`AgentRecord`) and each agent's event log. The runtime
writes every event of the tree through a `SessionStore` and rebuilds the tree from
`SessionStore.load`. `SQLiteStore` keeps sessions in one SQLite file and is the default;
`PostgresStore` keeps them in a PostgreSQL database that many hosts share (it needs the
``actors[postgres]`` extra, imported only when a `PostgresStore` is made); `MemoryStore` keeps
them in memory for tests and simulations. All three also keep the budgets that processes share
(``Budget(shared=...)``), an optional capability of a store: `BudgetStore`.
`actors.store.conformance` holds the test suite that any implementation can run.

Example:
    >>> from actors import AgentContext, UserMessage
    >>> from actors.store import AgentRecord, MemoryStore
    >>> ctx = AgentContext("root", name="assistant")
    >>> _ = ctx.add_message(UserMessage(content="hello"))
    >>> with MemoryStore() as store:
    ...     store.create_session("s1", root_agent_id="root")
    ...     store.put_agent("s1", AgentRecord("root", None, "assistant", "idle"))
    ...     store.append_events("s1", "root", ctx.events)
    ...     stored = store.load("s1")
    >>> AgentContext.deserialize(stored.agents[0].context).messages == ctx.messages
    True
"""

from actors.store._budgets import BudgetStore, BudgetTotals
from actors.store._memory import MemoryStore
from actors.store._postgres import PostgresStore
from actors.store._protocol import SessionStore
from actors.store._records import (
    AGENT_STATUSES,
    AgentRecord,
    SessionInfo,
    StoredAgent,
    StoredSession,
)
from actors.store._sqlite import Durability, SQLiteStore

__all__ = [
    "AGENT_STATUSES",
    "AgentRecord",
    "BudgetStore",
    "BudgetTotals",
    "Durability",
    "MemoryStore",
    "PostgresStore",
    "SessionInfo",
    "SessionStore",
    "SQLiteStore",
    "StoredAgent",
    "StoredSession",
]
