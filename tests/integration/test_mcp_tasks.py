"""MCP's Tasks extension on ``interlock serve --mcp``, driven by the official SDK's client (PyPI ``mcp``).

The client lists ``io.modelcontextprotocol/tasks`` in its capabilities (an SDK
``ClientExtension`` claiming the ``resultType: "task"`` shape); the SDK session sends the
extension's typed requests (``interlock.http._mcp.shapes``, with ``Mcp-Name`` routing). A call
becomes a task that works, then waits (``tasks/get`` shows the same input requests as an
``InputRequiredResult``), then completes once answered with ``tasks/update``; the transfers'
append-only log counts what ran.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.shared.exceptions import MCPError
from mcp_kit import APPROVE, McpServer, mcp_client, mcp_server, reason
from mcp_types import INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY, CallToolResult, ElicitResult, EmptyResult

from interlock.http._mcp.shapes import (
    EXTENSION,
    CancelTaskRequest,
    CreateTaskResult,
    GetTaskRequest,
    GetTaskResult,
    TaskParams,
    UpdateTaskParams,
    UpdateTaskRequest,
)

pytestmark = pytest.mark.slow


class TasksExtension(ClientExtension):
    """The client side of the extension: it advertises it and accepts a task handle from ``tools/call``."""

    identifier = EXTENSION

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=self._unresolved)]

    async def _unresolved(self, result: CreateTaskResult, ctx: ClaimContext) -> CallToolResult:
        raise AssertionError("the tests drive the task themselves (allow_claimed=True)")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpServer]:
    with mcp_server(tmp_path_factory.mktemp("mcp-tasks")) as running:
        yield running


async def start(client: Client, message: str) -> CreateTaskResult:
    got = await client.session.call_tool("bank", {"message": message}, allow_claimed=True)
    assert isinstance(got, CreateTaskResult), got
    return got


async def get(client: Client, task_id: str) -> GetTaskResult:
    return await client.session.send_request(GetTaskRequest(params=TaskParams(task_id=task_id)), GetTaskResult)


async def until(client: Client, task_id: str, *statuses: str) -> GetTaskResult:
    """Poll ``tasks/get`` (at the task's own interval) until its status is one of ``statuses``."""
    for _ in range(200):
        task = await get(client, task_id)
        if task.status in statuses:
            return task
        await asyncio.sleep((task.poll_interval_ms or 100) / 1000)
    raise AssertionError(f"task {task_id} never reached {statuses}")


async def update(
    client: Client, task: GetTaskResult, answers: dict[str, ElicitResult], state: str | None = None
) -> EmptyResult:
    """``tasks/update`` with ``answers`` and the task's sealed ``requestState`` (or ``state``)."""
    params = UpdateTaskParams(
        task_id=task.task_id, input_responses=dict(answers), request_state=state or task.request_state
    )
    return await client.session.send_request(UpdateTaskRequest(params=params), EmptyResult)


async def cancel(client: Client, task_id: str) -> EmptyResult:
    return await client.session.send_request(CancelTaskRequest(params=TaskParams(task_id=task_id)), EmptyResult)


async def test_a_call_as_a_task_works_waits_with_the_input_requests_and_completes_once_answered(
    server: McpServer,
) -> None:
    async with mcp_client(server.url, extensions=[TasksExtension()]) as client:
        assert EXTENSION in (client.server_capabilities.extensions or {})
        before = len(server.transfers())
        created = await start(client, "pay tina 6")
        assert created.result_type == "task" and created.status in ("working", "input_required")
        waiting = await until(client, created.task_id, "input_required")
        request = (waiting.input_requests or {})["t1"]
        assert request.method == "elicitation/create"
        assert request.params.requested_schema["properties"]["approved"]["type"] == "boolean"  # type: ignore[union-attr]
        assert waiting.request_state and len(server.transfers()) == before
        assert (await update(client, waiting, APPROVE)).result_type == "complete"
        done = await until(client, created.task_id, "completed", "failed", "cancelled")
    assert done.status == "completed" and done.result is not None
    assert "sent" in done.result["content"][0]["text"] and not done.result.get("isError")
    assert server.transfers()[before:] == ['{"to": "tina", "amount": 6.0}']


async def test_cancelling_a_paused_task_cancels_it_and_the_tool_never_runs(server: McpServer) -> None:
    async with mcp_client(server.url, extensions=[TasksExtension()]) as client:
        before = len(server.transfers())
        created = await start(client, "pay uma 8")
        waiting = await until(client, created.task_id, "input_required")
        assert (await cancel(client, created.task_id)).result_type == "complete"
        assert (await get(client, created.task_id)).status == "cancelled"
        with pytest.raises(MCPError, match="already answered") as late:
            await update(client, waiting, APPROVE)
    assert late.value.code == INVALID_PARAMS
    assert server.transfers()[before:] == []


async def test_of_two_racing_updates_one_wins_and_the_transfer_runs_once(server: McpServer) -> None:
    async with mcp_client(server.url, extensions=[TasksExtension()]) as client:
        before = len(server.transfers())
        created = await start(client, "pay vic 9")
        waiting = await until(client, created.task_id, "input_required")
        results = await asyncio.gather(*(update(client, waiting, APPROVE) for _ in range(2)), return_exceptions=True)
        done = await until(client, created.task_id, "completed", "failed", "cancelled")
    lost = [r for r in results if isinstance(r, MCPError)]
    assert len(lost) == 1 and lost[0].data["status"] == "ABORTED", results
    assert done.status == "completed"
    assert server.transfers()[before:] == ['{"to": "vic", "amount": 9.0}']


async def test_a_tampered_foreign_or_missing_state_is_refused_and_nothing_runs(server: McpServer) -> None:
    async with (
        mcp_client(server.url, extensions=[TasksExtension()]) as client,
        mcp_client(server.url, user="mallory", extensions=[TasksExtension()]) as other,
    ):
        before = len(server.transfers())
        created = await start(client, "pay walt 4")
        waiting = await until(client, created.task_id, "input_required")
        state = waiting.request_state or ""
        tampered = state[:-3] + ("AAA" if not state.endswith("AAA") else "BBB")
        for why, attempt in {
            "tampered": update(client, waiting, APPROVE, state=tampered),
            "foreign": update(other, waiting, APPROVE),
            "state": update(client, waiting.model_copy(update={"request_state": None}), APPROVE),
        }.items():
            with pytest.raises(MCPError) as refused:
                await attempt
            assert refused.value.code == INVALID_PARAMS and reason(refused.value) == why, (why, refused.value)
        assert (await get(client, created.task_id)).status == "input_required"
        assert len(server.transfers()) == before


async def test_a_client_that_does_not_ask_for_tasks_gets_no_task_and_cannot_read_one(server: McpServer) -> None:
    async with mcp_client(server.url, extensions=[TasksExtension()]) as client, mcp_client(server.url) as plain:
        created = await start(client, "pay xena 1")
        got = await plain.session.call_tool("bank", {"message": "pay xena 1"}, allow_input_required=True)
        assert not isinstance(got, CreateTaskResult)
        with pytest.raises(MCPError) as refused:
            await get(plain, created.task_id)
        with pytest.raises(MCPError, match="no task"):
            await get(client, "no-such-task")
    assert refused.value.code == MISSING_REQUIRED_CLIENT_CAPABILITY
