"""The in-process host: agent actors, their runtime, refs, restore and the effect runners.

`Runtime` hosts agent loops as pykka actors whose mailboxes run on a small shared pool of
threads; model calls run on one asyncio loop, blocking tools on a bounded pool. `AgentRef` is
the host's handle on an agent; restore rebuilds a stored tree; `SyncDriver` runs a loop inline
for tests. It stands on `actors.loop` and `actors.store`; the public names are re-exported from
`actors`.
"""
