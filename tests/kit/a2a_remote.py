"""A third-party A2A agent built with the official ``a2a-sdk`` (no interlock code), for ``uvicorn a2a_remote:app``.

Its executor asks for a booking reference (``TASK_STATE_INPUT_REQUIRED`` with a text question,
no interlock extension), then completes with the answer. Every completion appends a line to
``$A2A_REMOTE_RUNS`` (append-only: the tests count completions across processes). The card
names ``$A2A_REMOTE_URL`` (the test picks the port) as the JSON-RPC endpoint.
"""

from __future__ import annotations

import os

from a2a.helpers import new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, TaskState
from a2a.utils.constants import PROTOCOL_VERSION_1_0
from starlette.applications import Starlette


class Bookings(AgentExecutor):
    """Asks for a reference on a new task; completes the task with the answer it gets."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is None:
            assert context.message is not None
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
            updater = TaskUpdater(event_queue, task.id, task.context_id)
            asked = f"Which booking reference should I use for {context.get_user_input()!r}?"
            await updater.requires_input(updater.new_agent_message([new_text_part(asked)]))
            return
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        if task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
            await updater.failed(updater.new_agent_message([new_text_part("this task waits for nothing")]))
            return
        answer = context.get_user_input()
        with open(os.environ["A2A_REMOTE_RUNS"], "a") as runs:
            runs.write(f"completed {task.id} {answer}\n")
        await updater.complete(updater.new_agent_message([new_text_part(f"booked with reference {answer}")]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is not None:
            await TaskUpdater(event_queue, task.id, task.context_id).cancel()


def card() -> AgentCard:
    url = os.environ.get("A2A_REMOTE_URL", "http://127.0.0.1:0")
    return AgentCard(
        name="bookings",
        description="books trips; asks for the booking reference",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=PROTOCOL_VERSION_1_0)
        ],
        capabilities=AgentCapabilities(streaming=False, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="book", name="book", description="books a trip", tags=["travel"])],
    )


def build() -> Starlette:
    handler = DefaultRequestHandler(agent_executor=Bookings(), task_store=InMemoryTaskStore(), agent_card=card())
    return Starlette(routes=[*create_agent_card_routes(card()), *create_jsonrpc_routes(handler, rpc_url="/")])


app = build()
