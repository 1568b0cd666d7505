"""A simulation: 50 scripted agents gossip until every one knows the largest secret number.

Each agent is an actor with its own context. It starts knowing only its own secret (in its
logged system prompt). Every round, the host loop tells each agent what two random peers
believe; the agent answers with the largest number it has heard of so far, reading only its
own transcript.
All 50 agents of a round run at the same time. Seeded, so every run tells the same story.

For thousands of agents, drive each one with `actors.testing.SyncDriver` on one thread
instead: the same agent loop, no threads at all.

Run it: ``python examples/simulation.py``.
"""

from __future__ import annotations

import random
import re

from actors import Agent, Message, Runtime
from actors.testing import FunctionModel

AGENTS = 50
PEERS_PER_ROUND = 2


def gossip(messages: list[Message], _tools: object) -> str:
    """Believe the largest number in the transcript (the secret, and everything heard)."""
    numbers = [int(n) for m in messages for n in re.findall(r"(?:says|is) (\d+)", str(m.content))]
    return f"I believe the largest number is {max(numbers)}"


def main() -> None:
    rng = random.Random(7)
    secrets = rng.sample(range(1_000, 10_000), AGENTS)
    model = FunctionModel(gossip)
    specs = [
        # The secret is part of each agent's record (logged), not code that may change.
        Agent(f"agent-{i:02d}", model=model, system_prompt=f"Your secret number is {secret}.")
        for i, secret in enumerate(secrets)
    ]
    target = max(secrets)
    beliefs = dict.fromkeys(range(AGENTS), 0)
    with Runtime() as runtime:
        refs = [runtime.spawn(spec) for spec in specs]
        for round_ in range(1, 20):
            # Everyone hears from two random peers at once; all 50 runs are in flight together.
            futures = []
            for i, ref in enumerate(refs):
                peers = rng.sample([p for p in range(AGENTS) if p != i], PEERS_PER_ROUND)
                heard = "; ".join(f"agent-{p:02d} says {beliefs[p]}" for p in peers)
                futures.append(ref.run_async(f"Round {round_}: {heard}"))
            for i, future in enumerate(futures):
                beliefs[i] = int(future.result(timeout=30).output.rsplit(" ", 1)[1])
            knowing = sum(b == target for b in beliefs.values())
            print(f"round {round_:2d}: {knowing:2d}/{AGENTS} agents know the largest number")
            if knowing == AGENTS:
                break
        longest = max(len(ref.context().messages) for ref in refs)
    print(f"the largest secret is {target}; the longest transcript has {longest} messages")


if __name__ == "__main__":
    main()
