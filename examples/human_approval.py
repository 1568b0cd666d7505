"""Human in the loop: a tool that needs approval, and a tool that asks the host a question.

A run that needs the host stops with ``status == "suspended"`` and its open ``requests``. The
host answers with ``ref.resume({request.id: Answer(...)})`` and the run goes on. Approval is
deny-by-default: the tool never runs without an ``Answer(ok=True)``. An approval may also edit
the arguments the tool runs with.

Run it: ``python examples/human_approval.py``.
"""

from __future__ import annotations

from actors import (
    Agent,
    Answer,
    Message,
    Pending,
    Request,
    RunContext,
    Runtime,
    ToolResultMessage,
    UserMessage,
    tool,
)
from actors.testing import FunctionModel, call


@tool(requires_approval=True)
def transfer(amount: int, to: str) -> str:
    """Transfer money.

    Args:
        amount: How much, in euros.
        to: Who receives it.
    """
    return f"sent {amount} EUR to {to}"


@tool
def ask_user(ctx: RunContext, question: str) -> str | Pending:
    """Ask the user a question and wait for the answer.

    Args:
        ctx: The run context; ``ctx.answer`` holds the host's answer once it is given.
        question: The question.
    """
    if ctx.answer is None:
        return Pending(Request(kind="input", prompt=question))
    return str(ctx.answer.data)


def banker(messages: list[Message], _tools: object) -> object:
    """The model: ask who to pay, pay them, then report what happened."""
    start = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage))
    results = [m for m in messages[start:] if isinstance(m, ToolResultMessage)]
    if not results:
        return call("ask_user", question="Who should receive the money?")
    if len(results) == 1:
        return call("transfer", amount=500, to=results[0].content)
    return f"Done: {results[-1].content}"


agent = Agent("banker", model=FunctionModel(banker), tools=[transfer, ask_user])


def main() -> None:
    with Runtime() as runtime:
        ref = runtime.spawn(agent)

        result = ref.run("Pay my landlord.")
        (question,) = result.requests
        print(f"1. {result.status}: {question.kind} request {question.id!r}: {question.prompt}")

        result = ref.resume({question.id: Answer(data="Bob")})
        (approval,) = result.requests
        print(f"2. {result.status}: {approval.kind} request: {approval.data}")

        # Approve, but for less: the tool runs with the edited (and re-validated) arguments.
        edited = {"amount": 200, "to": "Bob"}
        result = ref.resume({approval.id: Answer(ok=True, arguments=edited)})
        print(f"3. {result.status}: {result.output}")

        # A second run; this time the host says no, and the model is told why.
        result = ref.run("Pay my landlord again.")
        result = ref.resume({result.requests[0].id: Answer(data="Mallory")})
        refusal = Answer(ok=False, reason="Mallory is not your landlord")
        result = ref.resume({result.requests[0].id: refusal})
        print(f"4. {result.status}: {result.output}")


if __name__ == "__main__":
    main()
