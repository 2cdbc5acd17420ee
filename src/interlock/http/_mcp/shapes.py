"""The shapes of MCP's Tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663, revision 2026-07-28).

PyPI ``mcp`` 2.3.0 carries the extension's machinery (``resultType`` claims on the client,
extension methods and capability ads on the server, ``Mcp-Name`` routing for ``tasks/*``)
but not its types, so they are defined here as the SDK's own models (``mcp_types``' bases:
camelCase on the wire, ``_meta`` where the spec has it), after the extension's schema
(``modelcontextprotocol/ext-tasks``, ``schema/2026-07-28``; the specification text is
``specification/draft/tasks.md`` there).

One addition of interlock's, in the extension's open members: an ``input_required`` task
carries the sealed ``requestState`` of its pause (as an ``InputRequiredResult`` does), and
``tasks/update`` echoes it beside ``inputResponses`` (the SDK's
:class:`~mcp_types.InputResponseRequestParams`), so an answer given through a task is bound
to its caller, its pause and an expiry exactly as a ``tools/call`` retry is (``docs/mcp.md``).
"""

from __future__ import annotations

from typing import Any, Literal

from mcp_types import (
    InputRequests,
    InputResponseRequestParams,
    Request,
    RequestParams,
    Result,
)

EXTENSION = "io.modelcontextprotocol/tasks"
"""The extension's identifier: in a request's ``clientCapabilities.extensions``, and in the server's capabilities."""

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]


class TaskParams(RequestParams):
    """``tasks/get`` and ``tasks/cancel``: the task's id."""

    task_id: str


class UpdateTaskParams(InputResponseRequestParams):
    """``tasks/update``: the task's id and the answers to its ``inputRequests`` (with interlock's ``requestState``).

    ``inputResponses`` is required by the extension; the handler says so when it is missing.
    """

    task_id: str


class Task(Result):
    """A task's state (the extension's ``Task``), as the results carrying it have it."""

    task_id: str
    status: TaskStatus
    status_message: str | None = None
    created_at: str
    """ISO 8601."""
    last_updated_at: str
    """ISO 8601."""
    ttl_ms: int | None
    """How long after ``createdAt`` the server may discard the task; ``None``: unlimited (always on the wire)."""
    poll_interval_ms: int | None = None


class CreateTaskResult(Task):
    """A ``tools/call`` answered with a task handle in lieu of its ``CallToolResult``."""

    result_type: Literal["task"] = "task"


class GetTaskResult(Task):
    """``tasks/get``: the task with what its status carries (the extension's ``DetailedTask``)."""

    result_type: Literal["complete"] = "complete"
    input_requests: InputRequests | None = None
    """``input_required``: every outstanding request (keyed as the answers must be)."""
    request_state: str | None = None
    """``input_required``: the sealed pause ``tasks/update`` echoes (interlock's addition)."""
    result: dict[str, Any] | None = None
    """``completed``: the ``CallToolResult`` the call would have returned."""
    error: dict[str, Any] | None = None
    """``failed``: the JSON-RPC error the call would have returned."""


class GetTaskRequest(Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param = "taskId"


class UpdateTaskRequest(Request[UpdateTaskParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    name_param = "taskId"


class CancelTaskRequest(Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    name_param = "taskId"


def wire(result: Task) -> dict[str, Any]:
    """``result`` as the handler's reply: ``ttlMs`` stays on the wire when it is ``null`` (the schema requires it)."""
    body = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return body | {"ttlMs": result.ttl_ms}
