"""The host layer: what every host of agent loops shares, and how a host is checked.

A host runs `AgentLoop`s: `Runtime` (pykka actors on a pool of threads), `SyncDriver` (the
calling thread), `Simulation` (one thread, a virtual clock) and `RayRuntime` (agent hosts as Ray
actors). They must behave alike wherever the design says so: a child starts with a snapshot of
its parent's metadata taken when the parent's tool was called, fan-out results come back in call
order, a request deep in a tree surfaces at the root, a cancel reaches every descendant. The
public submodule `actors.host.conformance` holds those behaviours as a test suite that each host
runs (and that a new host can run too), like `actors.store.conformance` for stores.
"""

from actors.host._face import HostFace, SessionHost

__all__ = ["HostFace", "SessionHost"]
