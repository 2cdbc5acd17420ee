"""``interlock serve --mcp`` driven by the official MCP SDK's client (PyPI ``mcp``), in a process of its own.

Each agent is a tool; a paused turn answers ``InputRequiredResult`` with the declared answer's
schema; the SDK's retry completes it. A replayed, tampered, foreign, expired or wrongly
answered ``requestState`` is a JSON-RPC error naming why, and nothing runs (the transfers'
append-only log says so); of 8 racing retries exactly one runs the transfer; an interrupt
answered from the inbox first is refused over MCP naming who answered.
"""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest
from inbox_apps import build_agents
from mcp.client.context import ClientRequestContext
from mcp.shared.exceptions import MCPError
from mcp_kit import APPROVE, McpServer, mcp_client, mcp_server, pause, reason, retry
from mcp_types import INVALID_PARAMS, CallToolResult, ElicitRequestParams, ElicitResult

from interlock import SQLiteStore
from interlock.inbox import Inbox

pytestmark = pytest.mark.slow

PAUSE = "io.interlock/pause"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpServer]:
    with mcp_server(tmp_path_factory.mktemp("mcp")) as running:
        yield running


def snapshot_of(first: Any) -> str:
    return first.meta[PAUSE]["snapshotId"]


async def pending(server: McpServer, snapshot_id: str) -> list[str]:
    async with SQLiteStore(server.db) as store:
        items = await Inbox(store, agents=build_agents(store)).pending()
    return [i.label for i in items if i.snapshot_id == snapshot_id]


async def test_each_agent_is_a_tool_taking_a_message_and_a_session(server: McpServer) -> None:
    async with mcp_client(server.url) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {"bank", "ops", "helpdesk"}
    assert tools["bank"].input_schema["required"] == ["message"]
    assert set(tools["bank"].input_schema["properties"]) == {"message", "sessionId"}


async def test_a_paused_call_asks_for_the_declared_answer_and_the_sdks_retry_completes_it(server: McpServer) -> None:
    asked: list[ElicitRequestParams] = []

    async def answer(ctx: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params)
        return ElicitResult(action="accept", content={"approved": True, "note": "ok"})

    before = len(server.transfers())
    async with mcp_client(server.url, elicitation_callback=answer) as client:
        first = await pause(client, message="pay dora 7")
        request = first.input_requests["t1"] if first.input_requests else None
        assert request is not None and request.method == "elicitation/create"
        schema = request.params.requested_schema  # type: ignore[union-attr]
        assert schema["properties"]["approved"]["type"] == "boolean" and schema["required"] == ["approved"]
        assert schema["properties"]["note"]["type"] == "string"
        assert "Send 7 EUR to dora?" in request.params.message
        done = await client.call_tool("bank", {"message": "pay dora 7"})  # the SDK answers and retries itself
    assert not done.is_error and "sent" in done.content[0].text  # type: ignore[union-attr]
    assert len(asked) == 1 and len(server.transfers()) == before + 1
    assert done.structured_content["finishReason"] == "stop"


async def test_a_held_call_asks_approve_or_deny_and_decline_ends_the_turn_without_running_it(server: McpServer) -> None:
    async with mcp_client(server.url) as client:
        first = await pause(client, "ops", "delete /etc")
        schema = first.input_requests["d1"].params.requested_schema  # type: ignore[index,union-attr]
        assert schema["properties"]["approve"]["type"] == "boolean"
        done = await retry(client, first, {"d1": ElicitResult(action="decline")}, agent="ops", message="delete /etc")
    assert isinstance(done, CallToolResult) and not done.is_error
    assert "not approved" in done.content[0].text  # type: ignore[union-attr]


async def test_an_interrupt_only_tool_asks_for_its_output(server: McpServer) -> None:
    async with mcp_client(server.url) as client:
        first = await pause(client, "helpdesk", "ask favourite colour")
        schema = first.input_requests["q1"].params.requested_schema  # type: ignore[index,union-attr]
        assert schema["properties"] == {"answer": {"type": "string", "title": "Answer"}}
        answer = {"q1": ElicitResult(action="accept", content={"answer": "teal"})}
        done = await retry(client, first, answer, agent="helpdesk", message="ask favourite colour")
    assert isinstance(done, CallToolResult) and "teal" in done.content[0].text  # type: ignore[union-attr]


async def test_a_cancel_answers_nothing_and_the_interrupt_still_waits(server: McpServer) -> None:
    async with mcp_client(server.url) as client:
        first = await pause(client)
        done = await retry(client, first, {"t1": ElicitResult(action="cancel")})
        assert isinstance(done, CallToolResult) and done.structured_content["answered"] is False
        assert await pending(server, snapshot_of(first)) == ["transfer#t1"]
        assert isinstance(await retry(client, first, APPROVE), CallToolResult)  # still answerable with the state


async def test_replayed_tampered_foreign_and_wrong_answers_are_refused_and_nothing_runs(server: McpServer) -> None:
    async with mcp_client(server.url) as client, mcp_client(server.url, user="mallory") as other:
        first = await pause(client)
        state = first.request_state or ""
        before = len(server.transfers())
        middle = len(state) // 2
        tampered = state[:middle] + ("A" if state[middle] != "A" else "B") + state[middle + 1 :]
        refusals = {
            "tampered": retry(client, first, APPROVE, state=tampered),
            "foreign": retry(other, first, APPROVE),
            "other_call": retry(client, first, APPROVE, message="pay bob 500"),
            "wrong answer": retry(client, first, {"t1": ElicitResult(action="accept", content={"approved": "yes"})}),
            "responses": retry(client, first, {"t9": ElicitResult(action="accept", content={"approved": True})}),
        }
        for why, attempt in refusals.items():
            with pytest.raises(MCPError) as refused:
                await attempt
            assert refused.value.code == INVALID_PARAMS, (why, refused.value)
            if why != "wrong answer":
                assert reason(refused.value) == why, refused.value
            assert len(server.transfers()) == before, why
        assert await pending(server, snapshot_of(first)) == ["transfer#t1"]
        assert isinstance(await retry(client, first, APPROVE), CallToolResult)
        with pytest.raises(MCPError, match="already answered by alice") as replayed:
            await retry(client, first, APPROVE)
    assert replayed.value.code == INVALID_PARAMS and replayed.value.data["status"] == "ABORTED"
    assert len(server.transfers()) == before + 1


async def test_of_eight_racing_retries_exactly_one_runs_the_transfer(server: McpServer) -> None:
    async with mcp_client(server.url) as client:
        first = await pause(client, message="pay race 3")
        before = len(server.transfers())
        results = await asyncio.gather(
            *(retry(client, first, APPROVE, message="pay race 3") for _ in range(8)), return_exceptions=True
        )
    won = [r for r in results if isinstance(r, CallToolResult)]
    lost = [r for r in results if isinstance(r, MCPError)]
    assert len(won) == 1 and not won[0].is_error, results
    assert len(lost) == 7 and all(e.data["status"] == "ABORTED" for e in lost), results
    assert server.transfers()[before:] == ['{"to": "race", "amount": 3.0}']


async def test_an_interrupt_answered_in_the_inbox_is_refused_over_mcp_naming_who(server: McpServer) -> None:
    async with mcp_client(server.url) as client:
        first = await pause(client, message="pay erin 2")
        async with SQLiteStore(server.db) as store:
            await Inbox(store, agents=build_agents(store)).reject(snapshot_of(first), identity="carol")
        before = len(server.transfers())
        with pytest.raises(MCPError, match=f"snapshot {snapshot_of(first)} was already answered by carol"):
            await retry(client, first, APPROVE, message="pay erin 2")
    assert len(server.transfers()) == before


async def test_an_expired_state_is_refused_and_nothing_runs(tmp_path: pathlib.Path) -> None:
    with mcp_server(tmp_path, "--mcp-state-ttl", "1") as short:
        async with mcp_client(short.url) as client:
            first = await pause(client)
            await asyncio.sleep(1.5)
            with pytest.raises(MCPError, match="the requestState expired at") as refused:
                await retry(client, first, APPROVE)
        assert reason(refused.value) == "expired" and short.transfers() == []
        assert await pending(short, snapshot_of(first)) == ["transfer#t1"]


async def test_a_client_of_an_older_revision_is_told_where_the_paused_turn_waits(server: McpServer) -> None:
    async with mcp_client(server.url, mode="legacy") as client:
        assert client.protocol_version != "2026-07-28"
        got = await client.call_tool("bank", {"message": "pay fred 4"})
    assert not got.is_error and got.structured_content["finishReason"] == "interrupted"
    assert "answer it in the inbox" in got.content[0].text  # type: ignore[union-attr]
    assert await pending(server, got.structured_content["snapshotId"]) == ["transfer#t1"]
