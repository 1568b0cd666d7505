"""The context layer: pure data, the floor every other layer stands on.

Messages, events and the event log, `ContextUpdate` and its one reducer, the `AgentContext` an
agent owns, its serialization, usage, the read-only `RunContext` tools receive, cancellation
tokens, suspension values and run results. Nothing here does I/O or knows about actors, models
or stores; it imports nothing of the package but `actors.exceptions`, the lazy logger of
`actors._logging` and the text rule of `actors._text`. The public names are re-exported from
`actors`.
"""
