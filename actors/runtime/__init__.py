"""The in-process host: agent actors on pooled mailboxes, their runtime and effect runners.

`Runtime` hosts agent loops as pykka actors whose mailboxes run on a small shared pool of
threads; model calls run on one asyncio loop, blocking tools on a bounded pool; passivation
puts idle trees to sleep in their store. `LocalHost` is the host behind it, which Ray's agent
hosts also run (with `Peers` for the agents of other hosts). What every host shares (the cell,
refs, restore, streams, child orchestration) is `actors.host`; `SyncDriver` runs a loop inline
for tests. The public names are re-exported from `actors`.
"""

from actors.runtime._local import LocalHost, Peers
from actors.runtime._runtime import Runtime

__all__ = ["LocalHost", "Peers", "Runtime"]
