"""A social network of 10,000 agents on a virtual clock: posts, follows, likes, a ranked feed.

Each user is an agent with its own context and interests (in its instructions). The platform
is plain Python reached by the tools through ``tool_context``: a ranked feed (followed authors
first, then popular posts, newer first), posting, following, liking, and direct messages sent
as peer messages (``ContextUpdate.send``). Every virtual minute the world wakes a few percent of
the users; each reads its feed, then likes, follows, posts or messages someone. The simulation
collects how the network grows, and how concentrated attention becomes: the share of all
follows held by the top 1% of users, a group effect that only shows at scale.

The model is a `FunctionModel` standing in for an LLM (swap in a real one, wrapped in a
`CachedModel` to rerun for free). Seeded: every run tells the same story, byte for byte.

Run it:  ``python examples/social.py [USERS] [SECONDS]``  (default 10,000 users, one hour)
or:      ``actors simulate examples/social.py:world --seed 1 --until 3600 --out social-out``
"""

from __future__ import annotations

import json
import sys
import zlib
from dataclasses import dataclass, field
from typing import Any

from actors import (
    Agent,
    ContextUpdate,
    Message,
    ModelRequest,
    RunContext,
    Tool,
    ToolCall,
    ToolResultMessage,
)
from actors.sim import Simulation, SimulationSettings
from actors.testing import FunctionModel

TOPICS = ("cats", "chess", "cycling", "jazz", "python", "space", "tea", "vinyl")


@dataclass
class Post:
    id: int
    author: str
    topic: str
    time: float
    likes: int = 0


@dataclass
class Platform:
    """The world: posts, the follow graph, a ranked feed."""

    sim: Simulation
    posts: list[Post] = field(default_factory=list)
    follows: dict[str, set[str]] = field(default_factory=dict)  # user -> who they follow
    followers: dict[str, int] = field(default_factory=dict)
    likes: int = 0
    messages: int = 0

    def feed(self, user: str, size: int = 5) -> list[Post]:
        """Followed authors' posts first, then the most liked; newer first within each."""
        followed = self.follows.get(user, set())
        recent = self.posts[-200:]
        now = self.sim.now

        def score(post: Post) -> float:
            age_hours = (now - post.time) / 3600
            return (3.0 if post.author in followed else 0.0) + post.likes - age_hours

        ranked = sorted((p for p in recent if p.author != user), key=score, reverse=True)
        return ranked[:size]

    def top_share(self) -> float:
        """The share of all follows held by the top 1% most-followed users."""
        counts = sorted(self.followers.values(), reverse=True)
        total = sum(counts)
        if not total:
            return 0.0
        top = max(1, len(self.follows) // 100)
        return round(sum(counts[:top]) / total, 4)


# -- tools ----------------------------------------------------------------------------------


def read_feed(ctx: RunContext[Platform]) -> str:
    """Read your ranked feed."""
    posts = ctx.tool_context.feed(ctx.agent_id)
    return json.dumps([[p.id, p.author, p.topic, p.likes] for p in posts])


def post(ctx: RunContext[Platform], topic: str) -> str:
    """Post about a topic.

    Args:
        topic: What the post is about.
    """
    platform = ctx.tool_context
    platform.posts.append(Post(len(platform.posts), ctx.agent_id, topic, platform.sim.now))
    return f"posted #{len(platform.posts) - 1}"


def like(ctx: RunContext[Platform], post_id: int) -> str:
    """Like a post.

    Args:
        post_id: The post.
    """
    platform = ctx.tool_context
    platform.posts[post_id].likes += 1
    platform.likes += 1
    return "liked"


def follow(ctx: RunContext[Platform], user: str) -> str:
    """Follow a user.

    Args:
        user: Their id.
    """
    platform = ctx.tool_context
    mine = platform.follows.setdefault(ctx.agent_id, set())
    if user not in mine:
        mine.add(user)
        platform.followers[user] = platform.followers.get(user, 0) + 1
    return f"following {len(mine)}"


def message(ctx: RunContext[Platform], user: str, text: str) -> tuple[str, ContextUpdate]:
    """Send a direct message (a peer message to that user's agent).

    Args:
        user: Their id.
        text: The message.
    """
    ctx.tool_context.messages += 1
    return "sent", ContextUpdate().send(user, text)


# -- the stand-in for an LLM ------------------------------------------------------------------


def _pick(seed: str, n: int) -> int:
    return zlib.crc32(seed.encode()) % n


def behave(messages: list[Message], tools: list[Any]) -> Any:
    """Read the feed, then act on it: like and follow what matches, post, or say hello."""
    persona = str(messages[0].content)
    interests = persona.split("interests: ", 1)[1].split(", ")
    last = messages[-1]
    turn = len(messages)
    if not isinstance(last, ToolResultMessage):
        return ToolCall(id=f"feed-{turn}", name="read_feed", arguments={})
    if last.tool_name != "read_feed":
        return "done"
    feed = json.loads(last.content)
    calls = []

    def act(name: str, **arguments: Any) -> None:
        calls.append(ToolCall(id=f"{name}-{turn}-{len(calls)}", name=name, arguments=arguments))

    for post_id, author, topic, _likes in feed:
        if topic in interests:
            act("like", post_id=post_id)
            if _pick(f"{persona}{author}", 3) == 0:
                act("follow", user=author)
            if _pick(f"{persona}{post_id}", 10) == 0:
                act("message", user=author, text=f"love your {topic}")
            break
    if not calls or _pick(f"{persona}{turn}", 4) == 0:
        act("post", topic=interests[_pick(f"{persona}{turn}t", len(interests))])
    return calls


def latency(request: ModelRequest, rng: Any) -> float:
    return rng.uniform(0.5, 2.5)  # seconds of (virtual) model time per step


# The world's settings, declared once: `actors simulate` and `main` below both use them.
@SimulationSettings(message_delay=5.0)  # a direct message takes 5 s to arrive
def world(sim: Simulation, users: int = 10_000, wake_share: float = 0.02) -> Platform:
    """Build the network onto ``sim``: ``users`` agents, a share woken every minute."""
    platform = Platform(sim)
    model = FunctionModel(behave, latency=latency)
    # One set of tools for every user: a spec is cheap, a tool's schema is not.
    tools = [Tool.from_function(f) for f in (read_feed, post, like, follow, message)]
    ids = [f"u{i:05d}" for i in range(users)]
    for user in ids:
        picks = sim.rng.sample(TOPICS, 2)
        spec = Agent(
            "user",
            model=model,
            instructions=f"You are {user}; interests: {', '.join(picks)}",
            tools=tools,
            on_message="queue",  # a message waits for the user's next visit
        )
        sim.spawn(spec, agent_id=user, tool_context=platform)
        platform.follows[user] = set()
    wake = max(1, int(users * wake_share))

    def minute() -> None:
        for user in sim.rng.sample(ids, wake):
            ref = sim.ref(user)
            if ref.status == "idle":
                ref.run_async("You open the app.")

    sim.every(60.0, minute)
    sim.collect("posts", lambda: len(platform.posts), every=300.0)
    sim.collect("likes", lambda: platform.likes, every=300.0)
    sim.collect("follows", lambda: sum(platform.followers.values()), every=300.0)
    sim.collect("messages", lambda: platform.messages, every=300.0)
    sim.collect("top1pct_share", platform.top_share, every=300.0)
    return platform


def main() -> None:
    users = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    until = float(sys.argv[2]) if len(sys.argv) > 2 else 3600.0
    sim = Simulation.for_world(world, seed=1)  # what `actors simulate --seed 1` makes
    world(sim, users=users)
    sim.run(until=until)
    rows = sim.rows()
    print(f"{users} users, {sim.now:g} virtual seconds, {sim.steps} agent-steps")
    for row in rows:
        print(
            f"t={row['time']:>6g}  posts={row['posts']:<6} likes={row['likes']:<6} "
            f"follows={row['follows']:<6} messages={row['messages']:<5} "
            f"top 1% share={row['top1pct_share']}"
        )


if __name__ == "__main__":
    main()
