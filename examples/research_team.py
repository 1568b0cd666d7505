"""A research team: a lead fans out to three researcher subagents in parallel.

Each researcher is its own actor with its own context. It starts with a copy of the lead's
metadata, reads the lead's ``tool_context`` (the same object, forwarded unchanged), records
what it found in its own metadata with a ``ContextUpdate``, and returns its answer to the lead
as a message. Nothing merges back into the lead's metadata except through that answer.

Run it: ``python examples/research_team.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from actors import Agent, AgentContext, ContextUpdate, RunContext, Runtime, tool
from actors.store import MemoryStore
from actors.testing import ScriptedModel, call


@dataclass(frozen=True)
class Library:
    """The static channel: a read-only service every agent of the tree may use."""

    books: dict[str, str]


@tool
def look_up(ctx: RunContext[Library], topic: str) -> tuple[str, ContextUpdate]:
    """Look a topic up in the library.

    Args:
        ctx: The run context.
        topic: What to look up.
    """
    found = ctx.tool_context.books.get(topic, "nothing")
    project = ctx.metadata["project"]  # a snapshot of the lead's metadata, copied at spawn
    note = f"{topic}: {found}"
    return f"[{project}] {note}", ContextUpdate().append("notes", note)


# One spec, three agents: `per_agent=True` gives each agent its own place in the script.
researcher = Agent(
    "researcher",
    model=ScriptedModel(
        [call("look_up", topic="actors"), "Found it in the library."],
        per_agent=True,
        latency=0.05,
    ),
    tools=[look_up],
    description="Looks a topic up and reports what it found.",
)

# The lead's first reply calls the researcher three times at once: three children in parallel.
lead = Agent(
    "lead",
    model=ScriptedModel(
        [
            [
                call("researcher", task="Research actors."),
                call("researcher", task="Research mailboxes."),
                call("researcher", task="Research supervision."),
            ],
            "All three researchers reported back.",
        ]
    ),
    subagents=[researcher],
)


def main() -> None:
    library = Library({"actors": "an actor owns its state and talks by messages"})
    store = MemoryStore()  # keeps every agent's log, so we can read the children's contexts
    with Runtime() as runtime:
        ref = runtime.spawn(lead, tool_context=library, metadata={"project": "agents"}, store=store)
        result = ref.run("Research the actor model.")
        tree = ref.tree()
        events = ref.context().events
    assert ref.session_id is not None
    stored = {
        a.agent_id: AgentContext.deserialize(a.context) for a in store.load(ref.session_id).agents
    }

    print("answer:", result.output)
    print("tree:")
    for node in tree.walk():
        indent = "  " if node.parent_id else ""
        print(f"  {indent}{node.agent_id} ({node.name}): {node.status}")
    print("each child: its usage, and the notes its tool wrote to its own metadata:")
    for event in events:
        if event.type == "subagent_finished":
            child, usage = event.data["child_id"], event.data["usage"]
            notes = stored[child].metadata["notes"]
            print(f"  {child}: {usage['requests']} requests, notes={notes}")
    # The children's notes stayed theirs: the lead's metadata is as it was.
    print("lead metadata after the run:", dict(result.metadata))
    print("tree usage:", result.tree_usage)


if __name__ == "__main__":
    main()
