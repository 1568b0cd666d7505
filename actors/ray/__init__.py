"""Agent trees on Ray, for when one machine is not enough.

`RayRuntime` has `Runtime`'s API: agents live in agent hosts, Ray actors that each run the
in-process host for many agents. A tree stays on its root's host unless a `Subagent` (or the
runtime) asks for ``placement="spread"``; messages between hosts are Ray actor calls, and the
store is shared. Importing `actors` never imports Ray; importing this package does (install it
with ``pip install 'actors[ray]'``).
"""

from actors.ray._runtime import RayRuntime

__all__ = ["RayRuntime"]
