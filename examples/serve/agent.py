"""A served assistant: ``actors serve agent:assistant`` (run from this folder).

Its model comes from ``ACTORS_DEFAULT_MODEL`` (e.g. ``openai:gpt-4o-mini`` with
``OPENAI_API_KEY`` set; ``test`` runs offline with a model that calls each tool once). It has a
tool that needs approval (the chat page shows approve/deny buttons) and a subagent (the page
shows it in the agent tree).
"""

from __future__ import annotations

from actors import Agent, Subagent, tool


@tool
def lookup_order(order_id: str) -> str:
    """Find an order by its id.

    Args:
        order_id: The order's id, such as "A-1001".
    """
    return f"order {order_id}: 2 items, shipped on Monday"


@tool(requires_approval=True)
def refund(order_id: str, amount: float) -> str:
    """Refund part of an order (a person approves it first).

    Args:
        order_id: The order's id.
        amount: How much to refund, in euros.
    """
    return f"refunded {amount:.2f} EUR on order {order_id}"


researcher = Agent(
    "researcher",
    instructions="Answer questions about our shipping policy in two sentences.",
    description="Knows the shipping and returns policy.",
)

assistant = Agent(
    "assistant",
    instructions=(
        "You are a customer support assistant. Look orders up before answering about them; "
        "ask the researcher about policy; refund only what the customer asks for."
    ),
    tools=[lookup_order, refund],
    subagents=[Subagent(researcher)],
    description="Customer support: orders, refunds and the shipping policy.",
)
