"""Faults at the MCP endpoint: a server SIGKILLed inside the retry's commit, and fuzzed ``tools/call`` requests.

Killed between the retry's claim and its commit, the server leaves the interrupt held; once
the claim's lease lapses (``claim_ttl=1``) the same ``requestState`` answers it on a restarted
server (sharing the key), and the transfer, which ran before the kill, is not run again (its
journaled output is replayed). Fuzzed arguments, ``requestState`` values and ``inputResponses``
(through the official SDK's client) and fuzzed JSON-RPC params (the SDK's own envelope model,
over HTTP) get no 5xx and no INTERNAL error, and leave the store as it was.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import signal
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.shared.exceptions import MCPError
from mcp_kit import APPROVE, McpServer, mcp_client, mcp_server, pause, retry
from mcp_types import INTERNAL_ERROR, CallToolResult, ElicitResult, InputRequiredResult, InputResponse, JSONRPCRequest

from interlock import SQLiteStore
from interlock.http._mcp.calls import SERVER_ERROR
from interlock.records.snapshots import claim_state

pytestmark = pytest.mark.slow
PAUSE = "io.interlock/pause"


async def _claim(db: pathlib.Path, snapshot_id: str) -> str:
    async with SQLiteStore(db) as store:
        snap = await store.load(snapshot_id)
    assert snap is not None
    return claim_state(snap)


async def test_a_server_killed_inside_the_retrys_commit_leaves_the_interrupt_answerable_after_the_claim_ttl(
    tmp_path: pathlib.Path,
) -> None:
    with mcp_server(tmp_path, target="mcp_served:server") as first_server:
        async with mcp_client(first_server.url) as client:
            first = await pause(client)
    about: Any = (first.meta or {})[PAUSE]
    snapshot_id = str(about["snapshotId"])
    marker = tmp_path / "hang.marker"
    hang = {"MCP_HANG_PARENT": snapshot_id, "MCP_HANG_MARKER": str(marker)}
    with mcp_server(tmp_path, target="mcp_served:server", env=hang) as hanging:
        with pytest.raises(BaseException) as lost:  # the connection dies with the server
            async with mcp_client(hanging.url) as client:
                attempt = asyncio.ensure_future(retry(client, first, APPROVE))
                for _ in range(600):
                    if marker.exists() or attempt.done():
                        break
                    await asyncio.sleep(0.05)
                assert marker.exists(), attempt
                hanging.process.proc.send_signal(signal.SIGKILL)
                await attempt
        died: Any = lost.value
        assert "RemoteProtocolError" in repr(died), died
    assert await _claim(hanging.db, snapshot_id) in ("held", "lapsed")
    assert hanging.transfers() == ['{"to": "bob", "amount": 5.0}']  # it ran, then the commit was killed
    with mcp_server(tmp_path, target="mcp_served:server") as again:
        deadline = time.monotonic() + 15
        while await _claim(again.db, snapshot_id) != "lapsed":
            assert time.monotonic() < deadline, "the killed holder's claim never lapsed"
            await asyncio.sleep(0.1)
        async with mcp_client(again.url) as client:
            done = await retry(client, first, APPROVE)
            assert isinstance(done, CallToolResult) and not done.is_error and "sent" in done.content[0].text  # type: ignore[union-attr]
            with pytest.raises(MCPError, match="already answered by alice"):
                await retry(client, first, APPROVE)
        assert await _claim(again.db, snapshot_id) == "answered"
        assert again.transfers() == ['{"to": "bob", "amount": 5.0}']  # replayed from the journal, not run again


# fuzzing -----------------------------------------------------------------------------------------

text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=24)
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | text
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3), max_leaves=8
)
contents = st.dictionaries(text, st.none() | st.booleans() | st.integers() | text | st.lists(text, max_size=2))
responses = st.dictionaries(
    text.filter(lambda k: k != "t1"),
    st.builds(ElicitResult, action=st.sampled_from(["accept", "decline", "cancel"]), content=st.none() | contents),
    max_size=3,
)


def _mutated(state: str, how: int, at: int, char: str) -> str:
    i = at % max(len(state), 1)
    return [state[:i] + char + state[i + 1 :], state[:i] + state[i + 1 :], state[:i] + char + state[i:], state][how]


class Fuzzed:
    """A server with one paused transfer, its InputRequiredResult, and the store's rows before fuzzing."""

    def __init__(self, server: McpServer, first: InputRequiredResult, rows: list[tuple[str, str]]) -> None:
        self.server, self.first, self.rows = server, first, rows


async def _rows(db: pathlib.Path) -> list[tuple[str, str]]:
    async with SQLiteStore(db) as store:
        return sorted((i.snapshot_id, i.status) for i in await store.list())


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fuzzed]:
    with mcp_server(tmp_path_factory.mktemp("mcp-fuzz")) as server:

        async def setup() -> Fuzzed:
            async with mcp_client(server.url) as client:
                first = await pause(client)
            return Fuzzed(server, first, await _rows(server.db))

        found = asyncio.run(setup())
        yield found
        assert asyncio.run(_rows(server.db)) == found.rows  # the store is as it was
        assert server.transfers() == []
        assert not any("Traceback" in line for line in server.process.log), "".join(server.process.log)


async def _call(url: str, arguments: Any, state: str | None, answers: dict[str, InputResponse]) -> None:
    async with mcp_client(url) as client:
        try:
            await client.session.call_tool(
                "bank", arguments, input_responses=answers, request_state=state, allow_input_required=True
            )
        except MCPError as exc:
            assert exc.code not in (INTERNAL_ERROR, SERVER_ERROR), exc  # a refusal, never a server fault


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    arguments=st.dictionaries(text, json_values, max_size=3) | st.just({"message": "pay bob 5"}),
    kind=st.sampled_from(["random", "mutated", "valid"]),
    noise=text,
    how=st.integers(0, 3),
    at=st.integers(0, 10_000),
    answers=responses,
)
def test_fuzzed_calls_get_no_internal_error_and_change_nothing(
    fuzzed: Fuzzed, arguments: dict[str, Any], kind: str, noise: str, how: int, at: int, answers: Any
) -> None:
    valid = fuzzed.first.request_state or ""
    state = {"random": noise, "mutated": _mutated(valid, how, at, noise[:1] or "x"), "valid": valid}[kind]
    asyncio.run(_call(fuzzed.server.url, arguments, state, answers))


HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": "2026-07-28",
    "x-user": "alice",
}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    params=st.dictionaries(text | st.sampled_from(["name", "arguments", "requestState", "inputResponses"]), json_values)
)
def test_fuzzed_json_rpc_params_get_no_5xx(fuzzed: Fuzzed, params: dict[str, Any]) -> None:
    params = {"name": "bank", "requestState": fuzzed.first.request_state, **params}
    if params.get("requestState") == fuzzed.first.request_state and params.get("arguments") == {"message": "pay bob 5"}:
        params["inputResponses"] = {}  # never a valid answer: the store must stay as it was
    body = JSONRPCRequest(jsonrpc="2.0", id=1, method="tools/call", params=params).model_dump_json(by_alias=True)
    got = httpx.post(f"{fuzzed.server.url}/mcp", content=body, headers=HEADERS, timeout=60)
    assert got.status_code < 500, got.text
    if got.headers.get("content-type", "").startswith("application/json"):
        error: Any = json.loads(got.text).get("error")
        assert error is None or error.get("code") != INTERNAL_ERROR, got.text
