"""MCP's Tasks extension over the protocol seam: a detached turn is a task, read, answered and cancelled.

A client that lists :data:`~.shapes.EXTENSION` in a ``tools/call``'s capabilities gets a
task instead of waiting: the call starts a detached turn and answers a ``CreateTaskResult``
whose ``taskId`` is that turn's snapshot id (its pending row, committed before the reply).
The task *is* snapshots (:mod:`interlock.http._task_view`, the walk A2A's tasks use), so any
process reads it and it outlives the server. ``tasks/get`` reports it: ``input_required``
carries one elicitation per pending interrupt and a sealed ``requestState``, as a paused
``tools/call`` does; ``tasks/update`` answers with that state through the very path a
``tools/call`` retry takes (:meth:`.calls.Calls.resume`: the state opened for this caller,
this task and before its expiry, then the seam's validation, fenced claim, resume tokens and
effect journal); ``tasks/cancel`` aborts a running detached turn and rejects every call a
paused one waits on (the call never runs). A refusal is a JSON-RPC error naming why.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import require_client_extension
from mcp.shared.exceptions import MCPError
from mcp_types import METHOD_NOT_FOUND, CallToolRequestParams, CallToolResult, InputRequiredResult
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ... import metadata as md
from ..._engine.io import AgentInit, AgentInput, AgentOutput
from ...errors import FailedPreconditionError, InvalidArgumentError, NotFoundError, error_from_status
from ...messages import Message
from .._service import Caller, RunningTurn
from .._task_view import CANCEL_NOTES, TaskView, cancel_answer, follow
from .calls import REFUSALS, SERVER_ERROR, Calls, answering, read_arguments, rpc_error, tool_result
from .forms import ask, form_for, key_of
from .shapes import EXTENSION, CreateTaskResult, GetTaskResult, TaskParams, UpdateTaskParams, wire

POLL_MS = 500
"""The polling interval a task suggests (``pollIntervalMs``)."""
CANCEL_NOTE = CANCEL_NOTES[1]
"""What ``tasks/cancel`` answers a paused task's calls with (a rejection: the call does not run)."""


def asks_for_tasks(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this request's client capabilities list the Tasks extension (MCP 2026-07-28 only)."""
    capabilities = ctx.session.client_capabilities
    declared = capabilities.extensions if capabilities is not None else None
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and bool(declared) and EXTENSION in (declared or {})


class Tasks:
    """The extension's handlers, and ``tools/call`` answering a task to a client that asks for one."""

    def __init__(self, calls: Calls) -> None:
        self.calls, self.service = calls, calls.service
        self._answering: dict[str, RunningTurn] = {}

    def handlers(self) -> dict[str, tuple[type[Any], Callable[..., Awaitable[Any]]]]:
        """The request methods to register on the SDK's low-level server, with their params' types."""
        return {
            "tasks/get": (TaskParams, self.get),
            "tasks/update": (UpdateTaskParams, self.update),
            "tasks/cancel": (TaskParams, self.cancel),
        }

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult | dict[str, Any]:
        """``tools/call``: a new call by a client that asks for tasks starts one; anything else is a call."""
        if params.request_state is None and asks_for_tasks(ctx):
            return await answering(f"tools/call {params.name!r} as a task", self._create(ctx, params))
        return await self.calls.call_tool(ctx, params)

    async def _create(self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> dict[str, Any]:
        name = params.name
        caller = await self.calls.caller(ctx, name)
        message, session_id = read_arguments(dict(params.arguments or {}))
        if params.input_responses:
            raise InvalidArgumentError("inputResponses answer a paused call: send them with its requestState")
        detached = AgentInput(message=Message.user(message), detach=True)
        turn = await self.service.start(name, detached, AgentInit(session_id=session_id), caller=caller)
        out = await turn.output()
        if out.error is not None or not out.snapshot_id:
            raise _error_of(out)
        view = await follow(self.service, name, out.snapshot_id, caller)  # durably created: it reads back
        return wire(CreateTaskResult(**_fields(view)))

    # tasks/get ---------------------------------------------------------------------------------

    async def get(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        return await answering("tasks/get", self._get(ctx, params.task_id))

    async def _get(self, ctx: ServerRequestContext[Any, Any], task_id: str) -> dict[str, Any]:
        agent, caller = await self._find(ctx, task_id)
        view = await follow(self.service, agent, task_id, caller)
        task = GetTaskResult(**_fields(view))
        if view.status == "input_required":
            return wire(await self._asking(agent, view, task, caller))
        if view.status in ("completed", "failed"):
            return wire(_ended(task, view))
        return wire(task)

    async def _asking(self, agent: str, view: TaskView, task: GetTaskResult, caller: Caller) -> GetTaskResult:
        """The ``input_required`` task: its outstanding requests and the sealed state ``tasks/update`` echoes."""
        snapshot_id = view.current.snapshot_id
        items = await self.service.pending(agent, snapshot_id=snapshot_id, caller=caller)
        state = self.calls.seal.seal(
            agent=agent,
            snapshot_id=snapshot_id,
            keys=[key_of(i) for i in items],
            tokens={key_of(i): t for i in items if (t := md.resume_token(i.part))},
            arguments=_bound(view.task_id),
            caller=caller,
        )
        requests = {key_of(i): ask(i, form_for(i, self.service.options(agent, i))) for i in items}
        labels = ", ".join(i.label for i in items)
        return task.model_copy(
            update={"input_requests": requests, "request_state": state, "status_message": f"waiting for {labels}"}
        )

    # tasks/update ------------------------------------------------------------------------------

    async def update(self, ctx: ServerRequestContext[Any, Any], params: UpdateTaskParams) -> dict[str, Any]:
        return await answering("tasks/update", self._update(ctx, params))

    async def _update(self, ctx: ServerRequestContext[Any, Any], params: UpdateTaskParams) -> dict[str, Any]:
        task_id = params.task_id
        agent, caller = await self._find(ctx, task_id)
        if not params.input_responses:
            raise InvalidArgumentError("tasks/update needs inputResponses: one answer per input request")
        if params.request_state is None:
            raise InvalidArgumentError(
                f"tasks/update needs the requestState tasks/get gave for task {task_id} "
                "(it binds the answer to you, this pause and an expiry); echo it beside inputResponses",
                details={"reason": "state"},
            )
        pause = self.calls.seal.open(params.request_state, agent=agent, arguments=_bound(task_id), caller=caller)
        turn = await self.calls.resume(agent, pause, params.input_responses, caller)
        if turn is None:  # a cancel: nothing is answered, the task still waits
            return {}
        self._answering[task_id] = turn
        try:
            out = await turn.output()
        finally:
            self._answering.pop(task_id, None)
        if out.error is not None and out.error.status in REFUSALS:  # lost the claim: nothing ran
            raise error_from_status(out.error.status, out.error.message, details=out.error.details)
        return {}

    # tasks/cancel ------------------------------------------------------------------------------

    async def cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        return await answering("tasks/cancel", self._cancel(ctx, params.task_id))

    async def _cancel(self, ctx: ServerRequestContext[Any, Any], task_id: str) -> dict[str, Any]:
        agent, caller = await self._find(ctx, task_id)
        view = await follow(self.service, agent, task_id, caller)
        if view.status == "input_required":
            await self._cancel_paused(agent, view, caller)
        elif view.status == "working":
            await self._cancel_running(agent, view, caller)
        else:
            raise FailedPreconditionError(f"task {task_id} is {view.status} already; there is nothing to cancel")
        return {}

    async def _cancel_paused(self, agent: str, view: TaskView, caller: Caller) -> None:
        """Every call the task waits on is rejected with :data:`CANCEL_NOTE` (none runs); a lost race is refused."""
        snapshot_id = view.current.snapshot_id
        items = await self.service.pending(agent, snapshot_id=snapshot_id, caller=caller)
        answers = {key_of(i): cancel_answer(self.service.options(agent, i), CANCEL_NOTE) for i in items}
        out = await (await self.service.resume(agent, snapshot_id, answers, caller=caller)).output()
        if out.error is not None and out.error.status in REFUSALS:
            raise error_from_status(out.error.status, out.error.message, details=out.error.details)

    async def _cancel_running(self, agent: str, view: TaskView, caller: Caller) -> None:
        running = self._answering.get(view.task_id)
        if running is not None:
            running.cancel()
        elif view.current.status == "pending":
            await self.service.abort(agent, view.current.snapshot_id, caller=caller)
        else:
            raise FailedPreconditionError(
                f"task {view.task_id} is running an answer in another process (turn {view.current.claimed_by}); "
                "cancel it there, or wait for it"
            )

    # finding a task ----------------------------------------------------------------------------

    async def _find(self, ctx: ServerRequestContext[Any, Any], task_id: str) -> tuple[str, Caller]:
        """The served agent whose task ``task_id`` is, and who asks; NOT_FOUND (``-32602``) when none has it.

        The extension's requests are refused (``-32021``) to a client that does not list it, and
        served only at MCP 2026-07-28. Each agent reads the id for its own caller (its tenant).
        """
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data=ctx.method)
        require_client_extension(ctx, EXTENSION)
        if not task_id:
            raise InvalidArgumentError("give the task's id (taskId), as tools/call returned it")
        for agent in self.service.names():
            if self.service.describe(agent).state_management != "server":
                continue
            caller = await self.calls.caller(ctx, agent)
            try:
                await self.service.read(agent, snapshot_id=task_id, caller=caller)
            except NotFoundError:
                continue
            return agent, caller
        raise NotFoundError(f"no task {task_id!r} here (or not yours): it was never created, or it was deleted")


def _bound(task_id: str) -> dict[str, Any]:
    """What a task's sealed state is bound to, in place of a call's arguments: the task."""
    return {"taskId": task_id}


def _fields(view: TaskView) -> dict[str, Any]:
    """What every shape of the task says: its id, status, times and polling hint (``ttlMs``: kept as snapshots are)."""
    snap = view.current
    return {
        "task_id": view.task_id,
        "status": view.status,
        "created_at": view.started.isoformat(),
        "last_updated_at": (snap.updated_at or snap.created_at).isoformat(),
        "ttl_ms": None,
        "poll_interval_ms": POLL_MS,
    }


def _ended(task: GetTaskResult, view: TaskView) -> GetTaskResult:
    """A task whose turn ended, as ``tools/call`` would have ended.

    ``completed`` with the call's result (``isError`` for a turn that failed), or ``failed``
    with the JSON-RPC error the call would have been refused with.
    """
    snap = view.current
    if snap.error is not None and snap.error.status in REFUSALS:
        refused = rpc_error(error_from_status(snap.error.status, snap.error.message, details=snap.error.details))
        return _failed(task, refused)
    if snap.error is None and view.status == "failed":  # a detached turn whose worker stopped (expired)
        stopped = MCPError(
            code=SERVER_ERROR, message=f"task {view.task_id}'s turn stopped before it ended; start it again"
        )
        return _failed(task, stopped)
    out = AgentOutput(
        session_id=snap.session_id,
        snapshot_id=snap.snapshot_id,
        message=snap.state.messages[-1] if snap.state and snap.state.messages else None,
        finish_reason=snap.finish_reason,
        error=snap.error,
    )
    result = tool_result(out).model_dump(by_alias=True, mode="json", exclude_none=True)
    return task.model_copy(update={"status": "completed", "result": result})


def _failed(task: GetTaskResult, exc: MCPError) -> GetTaskResult:
    error = exc.error.model_dump(mode="json", exclude_none=True)
    return task.model_copy(update={"status": "failed", "error": error, "status_message": exc.error.message})


def _error_of(out: AgentOutput) -> Exception:
    if out.error is None:
        return FailedPreconditionError("the turn did not start a task")
    return error_from_status(out.error.status, out.error.message, details=out.error.details)
