"""A model for the compaction tests: it reports the estimate as its count, and records requests."""

from __future__ import annotations

import threading
from collections.abc import Callable

from actors import AssistantMessage, ModelRequest, ModelResponse, ToolCall, Usage
from actors.context._messages import Message
from actors.loop._compaction import DEFAULT_SUMMARY_PROMPT
from actors.models._tokens import estimate_tokens


def is_summary(request: ModelRequest) -> bool:
    """Whether ``request`` is a compaction's summary request (the default prompt)."""
    return bool(request.messages) and request.messages[0].content == DEFAULT_SUMMARY_PROMPT


class Counting:
    """Replies "ok" (or what ``reply`` says); a summary request gets a short summary.

    Its reported input tokens are `estimate_tokens` of the request, so a test knows exactly
    what the provider counted. ``summarize`` may raise (a failing summarizer) or block.
    """

    def __init__(
        self,
        name: str = "counting",
        *,
        reply: Callable[[list[Message]], str | AssistantMessage] | None = None,
        summarize: Callable[[ModelRequest], str] | None = None,
        window: int | None = None,
    ) -> None:
        self.name = name
        self.reply = reply
        self.summarize = summarize
        self.window = window  # refuse larger requests as a provider would
        self.sent: list[tuple[int, ModelRequest]] = []
        self.summaries: list[ModelRequest] = []
        self.lock = threading.Lock()

    def answer(self, request: ModelRequest) -> ModelResponse:
        tokens = estimate_tokens(request)
        if is_summary(request):
            with self.lock:
                self.summaries.append(request)
            text = self.summarize(request) if self.summarize else f"summary {len(self.summaries)}"
            message = AssistantMessage(content=text)
        else:
            with self.lock:
                self.sent.append((tokens, request))
            if self.window is not None and tokens > self.window:
                from actors.exceptions import ContextTooLongError

                raise ContextTooLongError(
                    "HTTP 400: context_length_exceeded", status_code=400, body="too long"
                )
            made = self.reply(list(request.messages)) if self.reply else "ok"
            message = made if isinstance(made, AssistantMessage) else AssistantMessage(content=made)
        return ModelResponse(message, Usage(requests=1, input_tokens=tokens, output_tokens=1))

    async def request(self, request: ModelRequest) -> ModelResponse:
        return self.answer(request)

    def respond_inline(self, request: ModelRequest) -> ModelResponse | None:
        return self.answer(request)


def tool_turns(messages: list[Message]) -> str | AssistantMessage:
    """Call the ``note`` tool once per user message, then answer."""
    last = messages[-1]
    if last.role == "user":
        count = sum(1 for m in messages if m.role == "user")
        return AssistantMessage(
            content="", tool_calls=(ToolCall(id=f"c{count}", name="note", arguments={}),)
        )
    return "done"
