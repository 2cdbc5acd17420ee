"""A remote A2A agent as a sub-agent of :func:`~interlock.agents.delegate`, whose input-required tasks pause the turn.

::

    bookings = A2AAgent("https://bookings.example/a2a/bookings", description="books trips")
    agent = PromptAgent("travel", model, tools=[*delegate([bookings])], store=store)

A delegation call sends the task as an A2A message (the official ``a2a-sdk`` client, JSON-RPC
binding, from the agent's card) and waits for the task to settle. When it goes
``TASK_STATE_INPUT_REQUIRED`` the delegation call pauses as for any sub-agent: its questions
are surfaced in the delegating agent's interrupts, snapshot and inbox
(:mod:`interlock.http._a2a_questions`), and the pause's record keeps the task's id and
context, so any process can answer. Answering them (from any surface) resumes the turn; the
answers go to the task as its next message, and the delegation call finishes with the task's
reply. The remote keeps its own task, so interlock treats a call as not idempotent: a crash
during one leaves it in doubt for a person, never silently sent twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncGenerator, Mapping
from typing import Any, Literal

try:
    import httpx
    from a2a.client import ClientConfig, create_client
    from a2a.client.client import Client
    from a2a.types import (
        GetTaskRequest,
        Message,
        Role,
        SendMessageConfiguration,
        SendMessageRequest,
        Task,
        TaskState,
    )
    from a2a.utils.errors import A2AError, InvalidParamsError, TaskNotCancelableError, TaskNotFoundError
except ModuleNotFoundError as exc:  # the ``a2a`` extra
    raise ImportError(f"A2A agents need the official A2A SDK ({exc.name}): pip install 'interlock[a2a]'") from exc

from .._engine.io import AgentOutput
from .._json_object import is_object
from ..errors import InterlockError, SnapshotNotFoundError, UnavailableError, error_from_status
from ..interrupts._plan import Resume
from ..messages import Message as AgentMessage
from ..parts import TextPart, ToolRequestPart
from ..records._sessions import Artifact, ErrorInfo, SessionState, Snapshot
from ..tools._tool import Tool
from ._a2a_questions import answer_parts, interlock_entries, question_for, questions, text_of

_WORKING = frozenset({TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_UNSPECIFIED})


class A2AAgent:
    """A remote A2A agent (JSON-RPC binding) for :func:`~interlock.agents.delegate`.

    Args:
        url: the agent's base URL, where its card is (``<url>/.well-known/agent-card.json``),
            e.g. ``"http://127.0.0.1:8000/a2a/banker"`` for an agent of ``interlock serve --a2a``.
        name: the sub-agent's name (the delegation tool is ``delegate_to_<name>``); by default
            the URL's last path segment.
        description: what the model is told the agent does.
        headers: sent with every request (authentication, say).
        timeout: seconds one delegation call waits for the task to settle or ask.
        poll: seconds between reads of a task still working.
    """

    def __init__(
        self,
        url: str,
        *,
        name: str | None = None,
        description: str = "",
        headers: Mapping[str, str] | None = None,
        timeout: float = 300.0,
        poll: float = 0.25,
    ) -> None:
        self.url = url.rstrip("/")
        self.name = name or httpx.URL(self.url).path.rstrip("/").rsplit("/", 1)[-1]
        self.description = description
        self.headers = dict(headers or {})
        self.timeout = timeout
        self.poll = poll

    def __repr__(self) -> str:
        return f"A2AAgent({self.url!r}, name={self.name!r})"

    @property
    def state_management(self) -> Literal["server", "client"]:
        """``"client"``: the remote's task is not an interlock session (a delegation call is not run twice)."""
        return "client"

    def connect(
        self,
        *,
        snapshot_id: str | None = None,
        session_id: str | None = None,
        state: SessionState | None = None,
        context: dict[str, Any] | None = None,
    ) -> A2ATurn:
        """One turn: a new task (in context ``session_id``, if given), or an answer to task ``snapshot_id``."""
        return A2ATurn(self, task_id=snapshot_id, context_id=session_id)

    async def get_snapshot(
        self, snapshot_id: str | None = None, *, session_id: str | None = None, context: dict[str, Any] | None = None
    ) -> Snapshot:
        raise SnapshotNotFoundError(f"the A2A agent {self.name!r} keeps tasks, not interlock snapshots")

    def question(self, part: ToolRequestPart) -> Tool[Any, Any, Any] | None:
        """The tool answering ``part``, a question of one of this agent's tasks surfaced by delegation."""
        return question_for(self.name, part)

    @contextlib.asynccontextmanager
    async def client(self) -> AsyncGenerator[Client]:
        """The SDK's client of the agent (from its card): one per turn, nothing shared across turns."""
        timeout = httpx.Timeout(30.0, read=self.timeout)
        async with httpx.AsyncClient(headers=self.headers, timeout=timeout) as http:
            client = await create_client(self.url, ClientConfig(streaming=False, httpx_client=http))
            try:
                yield client
            finally:
                await client.close()


class A2ATurn:
    """One delegation turn of an :class:`A2AAgent`: send, close, then the output (the task, settled or asking)."""

    def __init__(self, agent: A2AAgent, *, task_id: str | None, context_id: str | None) -> None:
        self.agent, self.task_id, self.context_id = agent, task_id, context_id
        self._text: str | None = None
        self._resume: Resume | None = None
        self._run: asyncio.Task[AgentOutput] | None = None

    async def send(self, value: str | None = None, *, resume: Resume | None = None) -> None:
        self._text, self._resume = value, resume

    async def close(self) -> None:
        if self._run is None:
            self._run = asyncio.ensure_future(self._turn())

    async def output(self) -> AgentOutput:
        await self.close()
        assert self._run is not None
        return await self._run

    def cancel(self) -> None:
        if self._run is not None:
            self._run.cancel()

    async def _turn(self) -> AgentOutput:
        try:
            async with asyncio.timeout(self.agent.timeout), self.agent.client() as client:
                if self._resume is not None:
                    return await self._answer(client, self._resume)
                task = await self._send(client, self._message(TextPart(text=self._text or "")))
                return await self._settled(client, task)
        except TimeoutError:
            raise error_from_status(
                "DEADLINE_EXCEEDED", f"the A2A agent {self.agent.name!r} did not settle within {self.agent.timeout} s"
            ) from None
        except httpx.HTTPError as exc:
            raise UnavailableError(f"the A2A agent at {self.agent.url} is unreachable: {exc}") from exc
        except A2AError as exc:
            raise _error(exc) from None

    def _message(self, *parts: Any) -> Message:
        msg = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER)
        for part in parts:
            if isinstance(part, TextPart):
                msg.parts.add(text=part.text)
            else:
                msg.parts.append(part)
        if self.context_id:
            msg.context_id = self.context_id
        if self.task_id:
            msg.task_id = self.task_id
        return msg

    async def _send(self, client: Client, message: Message) -> Task | Message:
        request = SendMessageRequest(message=message, configuration=SendMessageConfiguration(return_immediately=False))
        last: Task | Message | None = None
        async for response in client.send_message(request):
            if response.HasField("task"):
                last = response.task
            elif response.HasField("message"):
                last = response.message
            elif response.HasField("status_update") and isinstance(last, Task):
                last.status.CopyFrom(response.status_update.status)
        if last is None:
            raise UnavailableError(f"the A2A agent {self.agent.name!r} answered the message with nothing")
        return last

    async def _settled(self, client: Client, found: Task | Message) -> AgentOutput:
        """The task once it leaves the working states (read again every ``poll`` seconds), as an output."""
        if isinstance(found, Message):  # a direct reply: no task
            return _reply(found.context_id, None, text_of(found.parts), [])
        task = found
        while task.status.state in _WORKING:
            await asyncio.sleep(self.agent.poll)
            task = await client.get_task(GetTaskRequest(id=task.id))
        return self._output(task)

    async def _answer(self, client: Client, resume: Resume) -> AgentOutput:
        """Send the answers as the task's next message; a task answered elsewhere first gives its own outcome."""
        task = await client.get_task(GetTaskRequest(id=self.task_id or ""))
        if task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
            return await self._settled(client, task)
        self.context_id = task.context_id
        extension = interlock_entries(task.status.message) is not None
        parts = answer_parts([*resume.respond, *resume.restart], extension)
        try:
            sent = await self._send(client, self._message(*parts))
        except A2AError as exc:
            now = await client.get_task(GetTaskRequest(id=task.id))
            if now.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
                return _refused(task, _error(exc))
            return await self._settled(client, now)  # answered (or canceled) by someone else first
        return await self._settled(client, sent)

    def _output(self, task: Task) -> AgentOutput:
        state, said = task.status.state, text_of(task.status.message.parts)
        if state == TaskState.TASK_STATE_INPUT_REQUIRED:
            asked = questions(self.agent.name, task.status.message)
            message = AgentMessage(role="model", content=list(asked))
            return AgentOutput(
                session_id=task.context_id, snapshot_id=task.id, message=message, finish_reason="interrupted"
            )
        if state == TaskState.TASK_STATE_COMPLETED:
            artifacts = [
                Artifact(name=a.name or a.artifact_id, parts=[TextPart(text=text_of(a.parts))]) for a in task.artifacts
            ]
            text = said or "\n".join(text_of(a.parts) for a in task.artifacts)
            return _reply(task.context_id, task.id, text, artifacts)
        if state == TaskState.TASK_STATE_CANCELED:
            return AgentOutput(session_id=task.context_id, snapshot_id=task.id, finish_reason="aborted")
        name = TaskState.Name(state).removeprefix("TASK_STATE_").lower().replace("_", "-")
        error = ErrorInfo(
            status="UNKNOWN", message=f"the A2A task {task.id} ended {name}" + (f": {said}" if said else "")
        )
        return AgentOutput(session_id=task.context_id, snapshot_id=task.id, finish_reason="failed", error=error)


def _reply(context_id: str, task_id: str | None, text: str, artifacts: list[Artifact]) -> AgentOutput:
    message = AgentMessage(role="model", content=[TextPart(text=text)])
    return AgentOutput(
        session_id=context_id, snapshot_id=task_id, message=message, artifacts=artifacts, finish_reason="stop"
    )


def _refused(task: Task, exc: InterlockError) -> AgentOutput:
    """The remote refused the answers and still waits: the resumed turn fails with the refusal, committing nothing."""
    error = ErrorInfo(status=exc.status, message=exc.message, details=exc.details)
    return AgentOutput(session_id=task.context_id, snapshot_id=task.id, finish_reason="failed", error=error)


_BY_KIND: dict[type[A2AError], str] = {
    InvalidParamsError: "INVALID_ARGUMENT",
    TaskNotFoundError: "NOT_FOUND",
    TaskNotCancelableError: "FAILED_PRECONDITION",
}


def _error(exc: A2AError) -> InterlockError:
    """An A2A error as interlock's: the canonical status its data names (an interlock server's), else its kind's."""
    data: Any = exc.data  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    status: Any = data.get("status") if is_object(data) else None
    if not isinstance(status, str):
        status = next((s for kind, s in _BY_KIND.items() if isinstance(exc, kind)), "FAILED_PRECONDITION")
    if status == "INTERNAL":
        status = "UNAVAILABLE"  # the remote's failure, not ours
    return error_from_status(status, f"the A2A agent refused: {exc.message}", details=data)
