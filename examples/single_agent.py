"""One agent with one tool, on a scripted model: the smallest complete program.

Run it: ``python examples/single_agent.py``. Swap the model for ``"openai:gpt-4o-mini"`` (with
``OPENAI_API_KEY`` set) and the same agent runs on a real provider.
"""

from __future__ import annotations

from actors import Agent, Runtime, tool
from actors.testing import ScriptedModel, call


@tool
def convert(amount: float, rate: float) -> float:
    """Convert an amount of money at an exchange rate.

    Args:
        amount: The amount to convert.
        rate: Units of the target currency per unit of the source currency.
    """
    return round(amount * rate, 2)


# The scripted model replies in order: first a tool call, then the final answer.
model = ScriptedModel(
    [call("convert", amount=120.0, rate=0.92), "120 USD is 110.40 EUR at a rate of 0.92."]
)
agent = Agent(
    "cashier",
    model=model,
    instructions="You convert currencies with the convert tool.",
    tools=[convert],
)


def main() -> None:
    with Runtime() as runtime:  # stops every actor on exit
        ref = runtime.spawn(agent)
        result = ref.run("How much is 120 USD in EUR? The rate is 0.92.")
    print("answer:", result.output)
    print("transcript:")
    for message in result.messages:
        calls = getattr(message, "tool_calls", ())
        text = message.content or ", ".join(f"{c.name}({c.arguments})" for c in calls)
        print(f"  {message.role}: {text}")
    print("usage:", result.usage)


if __name__ == "__main__":
    main()
