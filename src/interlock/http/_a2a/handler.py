"""The a2a-sdk's request handler over the protocol seam: one per served agent.

The SDK's JSON-RPC dispatcher parses each request into its protobuf type and calls this
handler; the handler translates it into :class:`~interlock.http._service.AgentService`
calls and the snapshots they give back into tasks (:mod:`._tasks`). A new message starts a
detached turn (its pending row is the task, so any process can read or cancel it); a message
on an input-required task is the seam's ``resume``. Nothing is kept here but the turns this
process is running for an answer (so a CancelTask can stop one).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    ExtendedAgentCardNotConfiguredError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    UnsupportedOperationError,
)

from ..._engine.io import AgentInit, AgentInput
from ..._json_object import is_object
from ...errors import AbortedError, InvalidArgumentError, error_from_status
from ...inbox._answers import Respond
from ...messages import Message as AgentMessage
from ...parts import Part as AgentPart
from ...parts import TextPart
from .._service import AgentService, Caller, RunningTurn
from . import tasks
from .errors import translated

CALLER = "interlock.caller"
"""Where the request's :class:`~interlock.http._service.Caller` rides in the SDK's call context."""
SETTLED_STATES = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_INPUT_REQUIRED,
    }
)


class AgentHandler(RequestHandler):
    """A2A requests for the agent served as ``agent``, through ``service``; ``wait`` bounds a blocking send."""

    def __init__(self, service: AgentService, agent: str, *, wait: float) -> None:
        self.service, self.agent, self.wait = service, agent, wait
        self._answering: dict[str, RunningTurn] = {}

    # reads -------------------------------------------------------------------------------------

    @translated
    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        return await self._task(params.id, _caller(context))

    async def _task(self, task_id: str, caller: Caller) -> Task:
        if not task_id:
            raise InvalidArgumentError("give the task's id")
        view = await tasks.follow(self.service, self.agent, task_id, caller)
        return await self._render(view, caller)

    async def _render(self, view: tasks.TaskView, caller: Caller) -> Task:
        pending = []
        if view.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            pending = await self.service.pending(self.agent, snapshot_id=view.current.snapshot_id, caller=caller)
        options = [self.service.options(self.agent, item) for item in pending]
        return tasks.task_of(view, pending, options)

    # sending -----------------------------------------------------------------------------------

    @translated
    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Task | Message:
        caller = _caller(context)
        task_id = await self._send(params.message, caller)
        if not params.configuration.return_immediately:
            await self._settle(task_id, caller)
        return await self._task(task_id, caller)

    @translated
    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        caller = _caller(context)
        task_id = await self._send(params.message, caller)
        async for event in self._updates(task_id, caller):
            yield event

    @translated
    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        caller = _caller(context)
        async for event in self._updates(params.id, caller):
            yield event

    async def _updates(self, task_id: str, caller: Caller) -> AsyncGenerator[Event]:
        """The task now, then its status once it settles (input-required counts: the stream ends there)."""
        first = await self._task(task_id, caller)
        yield first
        if first.status.state in SETTLED_STATES:
            return
        await self._settle(task_id, caller)
        done = await self._task(task_id, caller)
        yield TaskStatusUpdateEvent(task_id=done.id, context_id=done.context_id, status=done.status)

    async def _send(self, message: Message, caller: Caller) -> str:
        """Start the task ``message`` asks for, or answer the one it names; the task's id."""
        if message.task_id:
            await self._answer(message.task_id, message, caller)
            return message.task_id
        text = agent_message(message)
        init = AgentInit(session_id=message.context_id or None)
        turn = await self.service.start(self.agent, AgentInput(message=text, detach=True), init, caller=caller)
        out = await turn.output()
        if out.error is not None or out.snapshot_id is None:
            raise _error_of(out.error)
        return out.snapshot_id

    async def _settle(self, task_id: str, caller: Caller) -> None:
        """Wait (at most ``wait`` seconds) until the task settles or pauses: the store's watch, or our own turn."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait
        while (left := deadline - loop.time()) > 0:
            view = await tasks.follow(self.service, self.agent, task_id, caller)
            if view.state in SETTLED_STATES:
                return
            running = self._answering.get(task_id)
            if running is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(asyncio.shield(running.output()), left)
            elif view.current.status == "pending":
                await self.service.wait(self.agent, snapshot_id=view.current.snapshot_id, timeout=left, caller=caller)
            else:  # an answer runs in another process; its snapshot appears when it commits
                await asyncio.sleep(min(left, 0.2))

    async def _answer(self, task_id: str, message: Message, caller: Caller) -> None:
        """Resume the task's paused snapshot with the answers ``message`` carries; refusals are the engine's."""
        view = await tasks.follow(self.service, self.agent, task_id, caller)
        if message.context_id and message.context_id != view.current.session_id:
            raise InvalidArgumentError(
                f"task {task_id} is in context {view.current.session_id}, not {message.context_id}"
            )
        paused = view.current.finish_reason == "interrupted"
        target = view.current if paused else view.answered
        if target is None:
            raise UnsupportedOperationError(
                f"task {task_id} is {TaskState.Name(view.state)} and waits for no input; "
                "send a message without a taskId to start a new task"
            )
        if view.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            pending = await self.service.pending(self.agent, snapshot_id=target.snapshot_id, caller=caller)
            options = [self.service.options(self.agent, item) for item in pending]
            given = tasks.answers_of(message, pending, options)
        else:  # answered, being answered, or canceled: the engine refuses it, naming who answered
            given = _late_answers(message)
        if given is None:
            raise InvalidArgumentError(
                f'task {task_id} waits for answers: send a DataPart {{"answers": {{"<ref>": {{...}}}}}}'
            )
        await self._resume(view, target.snapshot_id, given, caller)

    async def _resume(self, view: tasks.TaskView, snapshot_id: str, given: tasks.Answers, caller: Caller) -> None:
        answers = given.answers if given.answers else given.single
        assert answers is not None
        try:
            turn = await self.service.resume(
                self.agent, snapshot_id, answers, caller=caller, tokens=given.tokens or None
            )
            self._answering[view.task_id] = turn
            try:
                out = await turn.output()
            finally:
                self._answering.pop(view.task_id, None)
            if out.error is not None and out.error.status in ("ABORTED", "INVALID_ARGUMENT", "PERMISSION_DENIED"):
                raise _error_of(out.error)
        except AbortedError as exc:
            raise await self._who_answered(view.task_id, exc, caller) from None

    async def _who_answered(self, task_id: str, exc: AbortedError, caller: Caller) -> AbortedError:
        """The engine's refusal of a second answer, with who answered (the winning resume's audit record)."""
        view = await tasks.follow(self.service, self.agent, task_id, caller)
        meta = view.answer_meta or {}
        by, at = meta.get("by"), meta.get("at")
        if view.answered is None or (by is None and at is None):
            return exc
        what = "canceled" if tasks.is_cancel(meta) else "answered"
        message = f"task {task_id} was already {what}" + (f" by {by}" if by is not None else "")
        message += (f" at {at}" if at else "") + f" (turn {view.answered.claimed_by}); each interrupt is answered once"
        error = AbortedError(message)
        error.details = {"winner": view.answered.claimed_by, "answeredBy": by, "answeredAt": at}
        return error

    # cancel ------------------------------------------------------------------------------------

    @translated
    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        caller = _caller(context)
        view = await tasks.follow(self.service, self.agent, params.id, caller)
        if view.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await self._cancel_paused(view, caller)
        elif view.state == TaskState.TASK_STATE_WORKING:
            await self._cancel_running(view, caller)
        else:
            raise TaskNotCancelableError(f"task {params.id} is {TaskState.Name(view.state)} already")
        return await self._task(params.id, caller)

    async def _cancel_paused(self, view: tasks.TaskView, caller: Caller) -> None:
        """A paused task is canceled by answering every call with a rejection (:func:`._tasks.cancel_answer`)."""
        pending = await self.service.pending(self.agent, snapshot_id=view.current.snapshot_id, caller=caller)
        answers = {tasks.key_of(i): tasks.cancel_answer(self.service.options(self.agent, i)) for i in pending}
        try:
            turn = await self.service.resume(self.agent, view.current.snapshot_id, answers, caller=caller)
            out = await turn.output()
            if out.error is not None and out.error.status != "INTERNAL":
                raise _error_of(out.error)
        except AbortedError as exc:
            raise await self._who_answered(view.task_id, exc, caller) from None

    async def _cancel_running(self, view: tasks.TaskView, caller: Caller) -> None:
        running = self._answering.get(view.task_id)
        if running is not None:
            running.cancel()
            return
        if view.current.status == "pending":
            await self.service.abort(self.agent, view.current.snapshot_id, caller=caller)
            return
        raise TaskNotCancelableError(
            f"task {view.task_id} is running an answer in another process (turn {view.current.claimed_by}); "
            "cancel it there, or wait for it"
        )

    # not offered -------------------------------------------------------------------------------

    async def on_list_tasks(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        raise UnsupportedOperationError("tasks are not listed here; read one by its id (GetTask)")

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError("use interlock's webhooks for notifications")

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError("use interlock's webhooks for notifications")

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError("use interlock's webhooks for notifications")

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise PushNotificationNotSupportedError("use interlock's webhooks for notifications")

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError("this agent has only its public card")


def _caller(context: ServerCallContext) -> Caller:
    found: Any = context.state.get(CALLER)
    return found if isinstance(found, Caller) else Caller()


def _late_answers(message: Message) -> tasks.Answers | None:
    """What a message on a task nobody waits on gives: its DataPart's answers, else its text as one answer."""
    for part in message.parts:
        value = tasks.from_value(part.data) if part.HasField("data") else None
        if is_object(value) and "answers" in value:
            return tasks.parse_answers(value["answers"])
    text = "\n".join(p.text for p in message.parts if p.HasField("text"))
    return tasks.Answers(answers={}, tokens={}, single=Respond(text)) if text else None


def agent_message(message: Message) -> AgentMessage:
    """An A2A user message as the agent's input: its text parts, and each DataPart as JSON text."""
    parts: list[AgentPart] = []
    for part in message.parts:
        if part.HasField("text"):
            parts.append(TextPart(text=part.text))
        elif part.HasField("data"):
            parts.append(TextPart(text=tasks.json.dumps(tasks.from_value(part.data))))
        else:
            raise InvalidArgumentError("this agent reads text and data parts; send the file's content as text")
    if not parts:
        raise InvalidArgumentError("the message has no parts: send the request as a text part")
    return AgentMessage(role="user", content=parts)


def _error_of(info: Any) -> Exception:
    if info is None:
        return InvalidArgumentError("the turn did not start")
    return error_from_status(info.status, info.message)
