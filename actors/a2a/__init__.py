"""A2A (agent to agent) for agents: a remote A2A agent as a subagent.

Needs the A2A SDK: ``pip install 'actors[a2a]'``. Importing ``actors`` never imports it;
importing ``actors.a2a`` without it raises an `ImportError` naming the extra.

- `A2AAgent(url)` is an `Agent` whose replies come from the A2A agent at ``url`` (any A2A
  server: another framework's, or ``actors serve``'s door at ``/a2a``). Give it to a parent as a
  subagent (``Agent(subagents=[A2AAgent(url)])``) and the parent's model calls the remote agent
  like any child: the child appears in the tree, the remote's streamed text arrives as the
  child's text deltas, and a remote failure or a timeout is the child's error for the parent.
  As a toolset (``Agent(toolsets=[A2AAgent(url)])``) it is one tool that asks the remote.

Serving the other way (each served agent is an A2A agent) is `actors.serve`'s: see
``actors serve`` and `actors.serve.a2a_routes`.
"""

from actors.a2a._require import require_a2a

require_a2a()

from actors.a2a._agent import A2AAgent  # noqa: E402 (after the SDK check)
from actors.a2a._model import A2AModel  # noqa: E402

__all__ = ["A2AAgent", "A2AModel"]
