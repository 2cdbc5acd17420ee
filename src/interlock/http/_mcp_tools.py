"""The tools of a remote MCP server, as interlock tools whose calls can pause the turn for a person.

::

    tools = await mcp_tools("https://bookings.example/mcp", headers={"Authorization": f"Bearer {token}"})
    agent = PromptAgent("travel", model, tools=[*tools], store=store)

:func:`mcp_tools` lists the server's tools (the official SDK's client, PyPI ``mcp``, over
Streamable HTTP) and gives one :class:`McpTool` per tool: its name, description and input
schema are the server's. A call is one ``tools/call``, through the effect journal like any
tool's (a crash during it leaves it in doubt, never silently repeated). When the server
answers ``InputRequiredResult`` (MCP 2026-07-28), the call pauses with one interrupt per input
request (:mod:`interlock.http._mcp_questions`); answering them, from any surface, resumes the
turn, and the call is retried with ``inputResponses`` and the server's ``requestState``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncGenerator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

try:
    import httpx2
    from mcp import Client
    from mcp.client import ClientRequestContext
    from mcp.client.streamable_http import streamable_http_client
    from mcp_types import (
        INVALID_REQUEST,
        CallToolResult,
        ElicitRequestParams,
        ElicitResult,
        ErrorData,
        InputRequiredResult,
        TextContent,
    )
    from mcp_types import Tool as Listed
except ModuleNotFoundError as exc:  # the ``mcp`` extra
    raise ImportError(f"MCP tools need the official MCP SDK ({exc.name}): pip install 'interlock[mcp]'") from exc

from .. import metadata as md
from ..errors import ToolError, ToolInputError, UsageError
from ..models import ToolDefinition
from ..models._chat_template import schema_errors
from ..parts import ToolRequestPart
from ..tools._context import ToolContext
from ..tools._signature import Signature
from ..tools._tool import InterruptedCall, Tool
from ._mcp_questions import answers_of, pause_for, question_for

_ROUNDS = 10
"""The most state-only rounds (an ``InputRequiredResult`` without questions) one call waits through."""


@dataclass(frozen=True, kw_only=True)
class McpServer:
    """Where an MCP server is, and how to reach it: its Streamable HTTP endpoint, headers and timeout."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict[str, str])
    timeout: float = 300.0

    @contextlib.asynccontextmanager
    async def connect(self) -> AsyncGenerator[Client]:
        """A connected client (the SDK's): one per use, so nothing is shared across turns or processes."""
        timeout = httpx2.Timeout(30.0, read=self.timeout)
        async with httpx2.AsyncClient(headers=dict(self.headers), timeout=timeout) as http:
            transport = streamable_http_client(self.url, http_client=http)
            async with Client(transport, elicitation_callback=_mid_call) as client:
                yield client

    async def list_tools(self) -> list[Listed]:
        """Every tool the server lists (all pages)."""
        async with self.connect() as client:
            return await _listed(client)


async def _mid_call(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult | ErrorData:
    """A server-to-client ``elicitation/create`` (servers before 2026-07-28): refused, not guessed at.

    Passing it declares the elicitation capability, so servers ask (in an ``InputRequiredResult``,
    which pauses the turn); a question asked in the middle of a call cannot outlive this process,
    so it is answered with an error that says so, and the server's tool fails rather than
    going on as if a person had cancelled.
    """
    return ErrorData(
        code=INVALID_REQUEST,
        message=(
            "interlock pauses for a person only on an InputRequiredResult (MCP 2026-07-28); "
            "it cannot answer an elicitation/create sent in the middle of a call"
        ),
    )


async def _listed(client: Client) -> list[Listed]:
    found: list[Listed] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        found += page.tools
        cursor = page.next_cursor
        if not cursor:
            return found


async def mcp_tools(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    names: Iterable[str] | None = None,
    prefix: str = "",
    timeout: float = 300.0,
) -> list[McpTool]:
    """The tools of the MCP server at ``url`` (its Streamable HTTP endpoint), for a :class:`~interlock.PromptAgent`.

    Args:
        url: the server's endpoint, e.g. ``"http://127.0.0.1:8000/mcp"``.
        headers: sent with every request (authentication, say).
        names: only these tools (by the server's names); raises :class:`~interlock.UsageError`
            naming any the server does not list.
        prefix: prepended to each tool's name as the model sees it (the server still gets its own).
        timeout: seconds a call may wait for the server's answer.
    """
    server = McpServer(url=url, headers=dict(headers or {}), timeout=timeout)
    listed = await server.list_tools()
    if names is not None:
        wanted = list(names)
        missing = sorted(set(wanted) - {t.name for t in listed})
        if missing:
            known = ", ".join(sorted(t.name for t in listed)) or "none"
            raise UsageError(f"the MCP server at {url} lists no tool {', '.join(missing)} (its tools: {known})")
        listed = [t for t in listed if t.name in wanted]
    return [McpTool(server, t, name=f"{prefix}{t.name}") for t in listed]


class McpTool(Tool[dict[str, Any], Any, dict[str, Any]]):
    """One tool of an MCP server: each call is a ``tools/call``, and the server's questions pause the turn."""

    def __init__(self, server: McpServer, listed: Listed, *, name: str | None = None) -> None:
        name = name or listed.name
        description = listed.description or listed.title or listed.name
        super().__init__(
            functools.partial(_call, server, listed.name),
            name=name,
            description=description,
            input_type=dict[str, Any],
            output_type=Any,
            resume_type=dict[str, Any],
            signature=_SIGNATURE,
        )
        self.server = server
        self.remote_name = listed.name
        """The tool's name on the server."""
        self.definition = ToolDefinition(
            name=name, description=description, input_schema=listed.input_schema, output_schema=listed.output_schema
        )

    def __repr__(self) -> str:
        return f"McpTool({self.name!r}, {self.server.url!r})"

    def validate_input(self, raw: object) -> dict[str, Any]:
        """The model's input, checked against the server's input schema; raises :class:`ToolInputError`."""
        value = super().validate_input(raw)
        problems = schema_errors(value, self.definition.input_schema or {})
        if problems:
            message = f"input for tool {self.name!r} is invalid: {'; '.join(problems)}"
            raise ToolInputError(message, tool=self.name, details=problems)
        return value

    def question(self, part: ToolRequestPart) -> Tool[Any, Any, Any] | None:
        return question_for(self.name, part)

    def interrupted(self, part: object) -> InterruptedCall[Any, Any, Any] | None:
        """A question this tool's call surfaced, typed by its requested schema (its respond and restart check it)."""
        if not isinstance(part, ToolRequestPart) or not part.is_interrupt:
            return None
        found = question_for(self.name, part)
        if found is None:
            return super().interrupted(part)
        return InterruptedCall(tool=found, part=part, input=part.input, data=part.meta(md.INTERRUPT))


_SIGNATURE = Signature(
    input_type=dict[str, Any],
    output_type=Any,
    resume_type=dict[str, Any],
    takes_input=True,
    takes_ctx=True,
    takes_resume=True,
)


async def _call(server: McpServer, remote: str, arguments: dict[str, Any], ctx: ToolContext[Any], resumed: Any) -> Any:
    """One call of the MCP tool ``remote``: the first, or the retry carrying the answers to its questions."""
    responses: dict[str, ElicitResult] | None = None
    state: str | None = None
    if isinstance(resumed, dict):
        responses, state = answers_of(resumed)  # pyright: ignore[reportUnknownArgumentType]
    async with server.connect() as client:
        await _listed(client)  # a 2026-07-28 server checks a call against the listing its client saw
        result = await client.session.call_tool(
            remote,
            arguments,
            input_responses=dict(responses or {}) or None,
            request_state=state,
            allow_input_required=True,
        )
        rounds = 0
        while isinstance(result, InputRequiredResult) and not result.input_requests:
            rounds += 1  # nothing to ask: the server wants the call again with its state (after a pause)
            if rounds > _ROUNDS:
                raise ToolError(f"the MCP server kept tool {remote!r} waiting for {_ROUNDS} rounds", tool=ctx.tool)
            await asyncio.sleep(0.05 * rounds)
            result = await client.session.call_tool(
                remote, arguments, request_state=result.request_state, allow_input_required=True
            )
    if isinstance(result, InputRequiredResult):
        ctx.interrupt(pause_for(ctx.tool, arguments, result).interrupt_data())
    return output_of(result)


def output_of(result: CallToolResult) -> Any:
    """What the model sees of a result: its structured content, else its text (``{"error": ...}`` for an error)."""
    if result.structured_content is not None and not result.is_error:
        return result.structured_content
    texts = [c.text for c in result.content if isinstance(c, TextContent)]
    others = [
        c.model_dump(mode="json", by_alias=True, exclude_none=True)
        for c in result.content
        if not isinstance(c, TextContent)
    ]
    body: Any = "\n".join(texts) if not others else [*texts, *others]
    return {"error": body} if result.is_error else body
