"""``tools/list`` and ``tools/call``: each served agent is one MCP tool, a paused turn an ``InputRequiredResult``.

A call without ``requestState`` starts a turn with its ``message`` (in the session
``sessionId`` names, if any). A turn that pauses answers with one elicitation per pending
interrupt (:mod:`.forms`) and a sealed ``requestState`` (:mod:`.state`); the client's retry
carries ``inputResponses`` and the state back, and resumes the paused snapshot through
:meth:`~interlock.http._service.AgentService.resume`: the same validation, fenced claim,
resume tokens and effect journal as every other answer. A refusal (a state that does not
open, an answer that does not fit, an answer that lost) is a JSON-RPC error, never a
``CallToolResult``, and nothing has run; a turn that ran and failed is a ``CallToolResult``
with ``isError``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Mapping
from typing import Any, TypeVar

from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ElicitResult,
    InputRequiredResult,
    InputResponse,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ... import metadata as md
from ..._engine.io import AgentInit, AgentInput, AgentOutput
from ..._json_object import is_object
from ...errors import FailedPreconditionError, InterlockError, InvalidArgumentError, error_from_status
from ...inbox._answers import Answer
from ...messages import Message
from .._mounts import MountHost
from .._service import Caller, RunningTurn
from .forms import answer_of, ask, form_for, key_of
from .state import Pause, StateSeal

logger = logging.getLogger("interlock.mcp")
_T = TypeVar("_T")

REFUSALS = frozenset(
    {
        "INVALID_ARGUMENT",
        "FAILED_PRECONDITION",
        "OUT_OF_RANGE",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "UNAUTHENTICATED",
        "ABORTED",
    }
)
"""Canonical statuses that refuse the request (``INVALID_PARAMS``); nothing ran."""
SERVER_ERROR = -32000
"""The JSON-RPC code of a server that cannot serve now (UNAVAILABLE, DEADLINE_EXCEEDED, ...): try again."""
PAUSE_META = "io.interlock/pause"
"""The ``_meta`` key of an ``InputRequiredResult`` naming the paused snapshot (answerable in the inbox too)."""
ARGUMENTS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "description": "what to tell the agent"},
        "sessionId": {"type": "string", "description": "continue this session (a previous result's sessionId)"},
    },
    "required": ["message"],
    "additionalProperties": False,
}
"""Every agent tool's input schema."""


def rpc_error(exc: InterlockError) -> MCPError:
    """The JSON-RPC error of a typed refusal: ``INVALID_PARAMS`` with the status and why in ``data``."""
    code = INVALID_PARAMS if exc.status in REFUSALS else SERVER_ERROR
    if exc.status in ("INTERNAL", "UNKNOWN", "DATA_LOSS"):
        code = INTERNAL_ERROR
    data: dict[str, Any] = {"status": exc.status}
    details: Any = json.loads(json.dumps(exc.details, default=str)) if exc.details is not None else None
    if is_object(details) and isinstance(details.get("reason"), str):
        data["reason"] = details["reason"]
    if details is not None:
        data["details"] = details
    return MCPError(code=code, message=f"{exc.status}: {exc.message}", data=data)


def read_arguments(arguments: Mapping[str, Any]) -> tuple[str, str | None]:
    """The call's ``message`` and ``sessionId``; INVALID_ARGUMENT for anything else."""
    unknown = sorted(set(arguments) - {"message", "sessionId"})
    if unknown:
        raise InvalidArgumentError(f"unknown argument {unknown[0]!r}; an agent takes 'message' and 'sessionId'")
    message, session = arguments.get("message"), arguments.get("sessionId")
    if not isinstance(message, str) or not message:
        raise InvalidArgumentError("'message' must be a non-empty string: what to tell the agent")
    if session is not None and (not isinstance(session, str) or not session):
        raise InvalidArgumentError("'sessionId' must be a session id a previous result gave")
    return message, session


class Calls:
    """The MCP server's tool handlers over the served agents (the protocol seam)."""

    def __init__(self, host: MountHost, seal: StateSeal) -> None:
        self.host, self.service, self.seal = host, host.service, seal

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        infos = [self.service.describe(name) for name in self.service.names()]
        return ListToolsResult(
            tools=[
                Tool(name=i.name, description=i.description or None, input_schema=ARGUMENTS)
                for i in infos
                if i.state_management == "server"
            ]
        )

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult:
        return await answering(f"tools/call {params.name!r}", self._call(ctx, params))

    async def caller(self, ctx: ServerRequestContext[Any, Any], name: str) -> Caller:
        """Who calls agent ``name`` (the server's context provider); MCP serves only server-managed agents."""
        if self.service.describe(name).state_management != "server":
            raise FailedPreconditionError(f"agent {name!r} keeps its state on the client, which MCP cannot carry")
        return await self.host.caller(_scope(ctx), name)

    async def _call(
        self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult:
        name, arguments = params.name, dict(params.arguments or {})
        caller = await self.caller(ctx, name)
        message, session_id = read_arguments(arguments)
        if params.request_state is None:
            if params.input_responses:
                raise InvalidArgumentError("inputResponses answer a paused call: send them with its requestState")
            init = AgentInit(session_id=session_id)
            turn = await self.service.start(name, AgentInput(message=Message.user(message)), init, caller=caller)
        else:
            pause = self.seal.open(params.request_state, agent=name, arguments=arguments, caller=caller)
            resumed = await self.resume(name, pause, params.input_responses or {}, caller)
            if resumed is None:
                return _abandoned(pause)
            turn = resumed
        return await self._result(ctx, name, await turn.output(), arguments, caller)

    async def resume(
        self, name: str, pause: Pause, responses: Mapping[str, InputResponse], caller: Caller
    ) -> RunningTurn | None:
        """The resumed turn the responses answer, or ``None`` when one was cancelled (nothing is answered)."""
        items = {key_of(i): i for i in await self.service.pending(name, snapshot_id=pause.snapshot_id, caller=caller)}
        if set(items) != set(pause.keys):
            raise await self._not_waiting(name, pause, caller)
        missing = [k for k in pause.keys if k not in responses]
        unknown = sorted(set(responses) - set(pause.keys))
        if missing or unknown:
            raise InvalidArgumentError(
                f"inputResponses must answer each input request ({', '.join(pause.keys)}) once: "
                + (f"missing {', '.join(missing)}" if missing else f"no input request {unknown[0]!r}"),
                details={"reason": "responses"},
            )
        answers: dict[str, Answer] = {}
        for key in pause.keys:
            response, item = responses[key], items[key]
            if not isinstance(response, ElicitResult):
                raise InvalidArgumentError(f"inputResponses[{key!r}] must be an elicitation result")
            answer = answer_of(item, form_for(item, self.service.options(name, item)), response)
            if answer is None:
                return None
            answers[key] = answer
        return await self.service.resume(name, pause.snapshot_id, answers, caller=caller, tokens=pause.tokens)

    async def _not_waiting(self, name: str, pause: Pause, caller: Caller) -> InterlockError:
        """Why the paused snapshot no longer waits on the sealed requests (e.g. already answered, by whom).

        The seam's resume with no answers says it (it refuses a snapshot that does not wait,
        naming the answer that won) and can run nothing: a resume must answer every interrupt.
        """
        try:
            turn = await self.service.resume(name, pause.snapshot_id, {}, caller=caller)
        except InterlockError as exc:
            return exc
        turn.cancel()
        return FailedPreconditionError(f"snapshot {pause.snapshot_id} no longer waits on {', '.join(pause.keys)}")

    async def _result(
        self,
        ctx: ServerRequestContext[Any, Any],
        name: str,
        out: AgentOutput,
        arguments: Mapping[str, Any],
        caller: Caller,
    ) -> CallToolResult | InputRequiredResult:
        if out.error is not None:
            return tool_result(out)
        if out.finish_reason == "interrupted" and out.snapshot_id:
            items = await self.service.pending(name, snapshot_id=out.snapshot_id, caller=caller)
            if items and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
                state = self.seal.seal(
                    agent=name,
                    snapshot_id=out.snapshot_id,
                    keys=[key_of(i) for i in items],
                    tokens={key_of(i): t for i in items if (t := md.resume_token(i.part))},
                    arguments=arguments,
                    caller=caller,
                )
                requests = {key_of(i): ask(i, form_for(i, self.service.options(name, i))) for i in items}
                meta = {PAUSE_META: {"snapshotId": out.snapshot_id, "sessionId": out.session_id}}
                return InputRequiredResult.model_validate(
                    {"inputRequests": requests, "requestState": state, "_meta": meta}
                )
            if items:  # a client of an older revision: it cannot answer here, the inbox can
                labels = ", ".join(i.label for i in items)
                text = f"paused: snapshot {out.snapshot_id} waits for an answer to {labels} (answer it in the inbox)"
                return CallToolResult(content=[TextContent(text=text)], structured_content=_about(out))
        return tool_result(out)


async def answering(what: str, work: Awaitable[_T]) -> _T:
    """``work``'s value; a typed refusal as its JSON-RPC error (:func:`rpc_error`), anything else INTERNAL, logged."""
    try:
        return await work
    except InterlockError as exc:
        raise rpc_error(exc) from None
    except MCPError:
        raise
    except Exception:
        logger.exception("%s failed", what)
        raise MCPError(code=INTERNAL_ERROR, message="Internal error") from None


def tool_result(out: AgentOutput) -> CallToolResult:
    """The ``CallToolResult`` of a turn that ended; a refusal (nothing ran) is raised, a failure is ``isError``."""
    if out.error is None:
        return CallToolResult(content=[TextContent(text=out.text)], structured_content=_about(out))
    if out.error.status in REFUSALS:
        raise error_from_status(out.error.status, out.error.message, details=out.error.details)
    text = f"{out.error.status}: {out.error.message}"
    return CallToolResult(content=[TextContent(text=text)], is_error=True, structured_content=_about(out))


def _about(out: AgentOutput) -> dict[str, Any]:
    return {
        "text": out.text,
        "sessionId": out.session_id,
        "snapshotId": out.snapshot_id,
        "finishReason": out.finish_reason,
    }


def _abandoned(pause: Pause) -> CallToolResult:
    text = (
        f"cancelled: nothing was answered; snapshot {pause.snapshot_id} still waits "
        "(call the tool again, or answer it in the inbox)"
    )
    about = {"snapshotId": pause.snapshot_id, "finishReason": "interrupted", "answered": False}
    return CallToolResult(content=[TextContent(text=text)], structured_content=about)


def _scope(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
    """The ASGI scope of the HTTP request carrying the call (the caller is read from it)."""
    scope: Any = getattr(ctx.request, "scope", None)
    return scope if is_object(scope) else {"type": "http", "headers": [], "path": ""}
