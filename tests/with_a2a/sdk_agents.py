"""Tiny A2A agents built with the SDK alone (no actors), served on starlette for the tests.

``echo`` streams ``"echo: <text>"`` as artifact chunks; ``fail`` fails its task; ``hang`` never
answers (until the server stops); ``ask`` wants input.
"""

from __future__ import annotations

import asyncio
import threading

from a2a.helpers import new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from starlette.applications import Starlette


class ToyExecutor(AgentExecutor):
    """Answers by the first word of the message."""

    def __init__(self) -> None:
        self.cancelled: list[str] = []
        self.hanging = threading.Event()  # a "hang" task has started
        self.cancel_seen = threading.Event()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = context.current_task or new_task_from_user_message(context.message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        text = context.get_user_input()
        await updater.start_work()
        if text.startswith("fail"):
            await updater.failed(updater.new_agent_message([new_text_part("the toy broke")]))
        elif text.startswith("hang"):
            self.hanging.set()
            await asyncio.Event().wait()  # until cancelled
        elif text.startswith("ask"):
            await updater.requires_input(
                updater.new_agent_message([new_text_part("which colour?")])
            )
        else:
            chunks = ["echo: ", *text.split(" ")]
            for index, chunk in enumerate(chunks):
                await updater.add_artifact(
                    [new_text_part(chunk if index < 2 else " " + chunk)],
                    artifact_id="answer",
                    append=index > 0,
                    last_chunk=index == len(chunks) - 1,
                )
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None
        assert context.context_id is not None
        self.cancelled.append(context.task_id)
        self.cancel_seen.set()
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def toy_app(url: str, executor: ToyExecutor) -> Starlette:
    """A starlette app serving the toy agent, its card saying it is at ``url``."""
    card = AgentCard(
        name="toy",
        description="A toy A2A agent built with the SDK alone.",
        version="1.0",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="echo", description="Echoes.", tags=["toy"])],
    )
    handler = DefaultRequestHandler(
        agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card
    )
    return Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")])
