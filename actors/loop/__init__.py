"""The agent loop: one agent's state machine, written once for every host.

The `Agent` spec (tools, subagents, output type, limits), tools and their outcomes, structured
output, and `AgentLoop`, which takes inputs (a run to start, a model reply, a finished tool or
child) and returns effects for its host to carry out. It never blocks and never does I/O, so
the same code runs inside a pooled pykka actor, a Ray actor or the deterministic simulator.
It stands on `actors.context` and `actors.models`; the public names are re-exported from
`actors`.
"""
