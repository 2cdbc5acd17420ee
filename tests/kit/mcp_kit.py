"""The official MCP SDK client against ``interlock serve inbox_served:server --mcp`` (integration, faults).

:func:`mcp_server` starts the server in its own process over a SQLite file, with
``INBOX_RUNS_LOG`` (every transfer that runs appends a line) and a shared requestState key;
:func:`mcp_client` opens an SDK ``Client`` signed in as a user (the ``X-User`` header the
test deployment's context hook reads).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import sys
from collections.abc import AsyncGenerator, Generator
from dataclasses import dataclass
from typing import Any

import httpx2
from http_helpers import ServerProcess, serve_process
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, ElicitResult, InputRequiredResult
from where import KIT

from interlock._json_object import is_object

KEY = "mcp-test-key-0123456789abcdef0123456789"
"""The requestState key every test server shares (so a restarted server opens the states it sealed)."""


@dataclass
class McpServer:
    """A running ``interlock serve --mcp``: its URL, its SQLite file and its transfers' log."""

    url: str
    db: pathlib.Path
    runs: pathlib.Path
    process: ServerProcess

    def transfers(self) -> list[str]:
        """The transfers that ran, one line each, in the order they ran."""
        return self.runs.read_text().splitlines() if self.runs.exists() else []


@contextlib.contextmanager
def mcp_server(
    work: pathlib.Path, *extra: str, target: str = "inbox_served:server", env: dict[str, str] | None = None
) -> Generator[McpServer]:
    """``interlock serve TARGET --mcp`` over ``work/sessions.db``, with ``env`` set for it."""
    db, runs = work / "sessions.db", work / "runs.log"
    env = {"INTERLOCK_STORE": str(db), "INBOX_RUNS_LOG": str(runs), "INTERLOCK_MCP_KEYS": KEY, **(env or {})}
    command = [sys.executable, "-m", "interlock", "serve", target, "--mcp", "--port", "0"]
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        with serve_process([*command, "--log-level", "info", *extra], cwd=KIT) as process:
            yield McpServer(url=process.url, db=db, runs=runs, process=process)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.asynccontextmanager
async def mcp_client(url: str, user: str = "alice", **options: Any) -> AsyncGenerator[Client]:
    """An MCP SDK client of ``url``'s ``/mcp``, signed in as ``user``."""
    async with (
        httpx2.AsyncClient(headers={"x-user": user}, timeout=httpx2.Timeout(60.0)) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http), **options) as client,
    ):
        yield client


async def pause(client: Client, agent: str = "bank", message: str = "pay bob 5") -> InputRequiredResult:
    """Call ``agent`` with ``message``; the turn pauses."""
    got = await client.session.call_tool(agent, {"message": message}, allow_input_required=True)
    assert isinstance(got, InputRequiredResult), got
    return got


async def retry(
    client: Client,
    first: InputRequiredResult,
    answers: dict[str, ElicitResult],
    *,
    agent: str = "bank",
    message: str = "pay bob 5",
    state: str | None = None,
) -> CallToolResult | InputRequiredResult:
    """The retry of the call that returned ``first``, with ``answers`` and its ``requestState`` (or ``state``)."""
    got = await client.session.call_tool(
        agent,
        {"message": message},
        input_responses=dict(answers),
        request_state=first.request_state if state is None else state,
        allow_input_required=True,
    )
    assert isinstance(got, (CallToolResult, InputRequiredResult)), got
    return got


APPROVE = {"t1": ElicitResult(action="accept", content={"approved": True})}
"""The answer approving the bank's transfer."""


def reason(error: MCPError) -> str | None:
    """The refusal's reason (``data.reason``), if it gives one."""
    data: Any = error.data
    found: Any = data.get("reason") if is_object(data) else None
    return found if isinstance(found, str) else None
