"""The host layer: what every host of agent loops shares, and how a host is checked.

A host runs `AgentLoop`s: `Runtime` (pykka actors on a pool of threads), `SyncDriver` (the
calling thread), `Simulation` (one thread, a virtual clock) and `RayRuntime` (agent hosts as Ray
actors). What they share lives here, once: the `AgentCell` that applies an agent's inputs and
hands its effects to its `Host`; the agent's record (`AgentNode`, its `Tree`); the messages hosts
pass (`HostReply`, `ParentReply`, ...); child orchestration (`Orchestration`, over a few host
primitives); persistence and restore (`persist`, `restore_tree`); tombstones and tree views;
streams (`TreeStream`); observers; the refs users hold (`AgentRef`); and the inline host
(`InlineHost`) that `SyncDriver` and `Simulation` build on. A new host builds on these names;
`actors.host.conformance` checks that it behaves as the others do. `HostFace` and
`SessionHost` say what every host shows its user.
"""

from actors.host._approval import ApprovalHandler, decide_approval
from actors.host._cell import AgentCell, Host
from actors.host._children import Orchestration, run_timeout
from actors.host._face import HostFace, SessionHost
from actors.host._fork import make_fork, make_rewind
from actors.host._inline import InlineHost
from actors.host._keyed_lock import KeyedLock
from actors.host._messages import (
    Ask,
    Delegate,
    DelegateDone,
    DelegateReply,
    ExpireRun,
    HostReply,
    OpenStream,
    ParentReply,
    Passivate,
    PeerBatch,
    Query,
    Reply,
    inline_reply,
    settle,
)
from actors.host._node import AgentNode, Tree, new_child, new_root
from actors.host._observer import TreeObserver, current_observer, set_tree_observer
from actors.host._persist import persist
from actors.host._ref import AgentRef, RefHost, RunFuture
from actors.host._restore import restore_tree
from actors.host._stream import (
    RunEnded,
    StreamEvent,
    SubagentFinished,
    SubagentSpawned,
    Suspended,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
    TreeStream,
)
from actors.host._tombstone import Tombstone, TreeNode
from actors.host._tool_pool import ToolPool

__all__ = [
    "AgentCell",
    "AgentNode",
    "AgentRef",
    "ApprovalHandler",
    "Ask",
    "current_observer",
    "decide_approval",
    "Delegate",
    "DelegateDone",
    "DelegateReply",
    "ExpireRun",
    "Host",
    "HostFace",
    "HostReply",
    "InlineHost",
    "inline_reply",
    "KeyedLock",
    "make_fork",
    "make_rewind",
    "new_child",
    "new_root",
    "OpenStream",
    "Orchestration",
    "ParentReply",
    "Passivate",
    "PeerBatch",
    "persist",
    "Query",
    "RefHost",
    "Reply",
    "restore_tree",
    "run_timeout",
    "RunEnded",
    "RunFuture",
    "SessionHost",
    "set_tree_observer",
    "settle",
    "StreamEvent",
    "SubagentFinished",
    "SubagentSpawned",
    "Suspended",
    "TextDelta",
    "ToolCallDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolPool",
    "Tombstone",
    "Tree",
    "TreeNode",
    "TreeObserver",
    "TreeStream",
]
