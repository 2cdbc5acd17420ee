"""``interlock serve --a2a``: every served agent as an A2A agent, beside the Genkit routes.

:class:`A2A` is a :class:`~interlock.http._mounts.ProtocolMount`. Under its prefix (``/a2a``)
each agent answers JSON-RPC at ``/a2a/{agent}`` (the a2a-sdk's dispatcher, over
:class:`.handler.AgentHandler`) and serves its card at
``/a2a/{agent}/.well-known/agent-card.json``. Every request's caller is the server's
(its context provider sees ``action="a2a"``), as for the Genkit routes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.response_helpers import agent_card_to_dict, build_error_response
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import AgentCapabilities, AgentCard, AgentExtension, AgentInterface, AgentSkill
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, PROTOCOL_VERSION_1_0
from google.protobuf import struct_pb2
from google.protobuf.json_format import ParseDict
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ...errors import InterlockError, NotFoundError
from .._asgi import Action, Receive, Scope, Send, route_path
from .._mounts import ASGIApp, MountHost, no_lifespan
from .errors import a2a_error
from .handler import CALLER, AgentHandler
from .tasks import EXTENSION_URI

EXTENSION_DESCRIPTION = (
    "interlock interrupts: an input-required task's status message carries a DataPart "
    '{"interrupts": [...]} (each with tool, ref, input, interrupt, answerSchema, decisions, resumeToken, '
    'deadline); answer with a message on the task whose DataPart is {"answers": {"<ref>": answer}}'
)


_CLIENT_MISTAKES = frozenset({"Failed to validate base JSON-RPC request", "Failed to parse request params"})
"""What the SDK's dispatcher logs with a traceback for a body that is not a JSON-RPC request, or bad params."""


class _ClientMistake(logging.Filter):
    """A client's malformed request, logged by the SDK as a warning with its reason, not a server traceback.

    The client gets its JSON-RPC error (``-32600`` or ``-32602``) either way; only a failure of
    the server's own (the SDK's ``Unhandled exception``) keeps its traceback.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg in _CLIENT_MISTAKES and record.exc_info:
            reason = record.exc_info[1]
            record.msg = f"{record.msg} (the client's): {reason}"
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def _quiet_client_mistakes() -> None:
    log = logging.getLogger("a2a.server.routes.jsonrpc_dispatcher")
    if not any(isinstance(f, _ClientMistake) for f in log.filters):
        log.addFilter(_ClientMistake())


class _Context(DefaultServerCallContextBuilder):
    """The SDK's call context, carrying the caller the server's context provider named."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state[CALLER] = request.scope.get(CALLER)
        return context


@dataclass(frozen=True, kw_only=True, slots=True)
class A2A:
    """The A2A protocol (JSON-RPC binding) for every served agent, under ``prefix``.

    ``wait`` is how long a blocking ``SendMessage`` waits for its task to settle or pause
    before it answers with the task still working (read it later with ``GetTask``).
    """

    prefix: str = "/a2a"
    wait: float = 300.0

    @property
    def name(self) -> Action:
        return "a2a"

    def lifespan(self) -> Any:
        return no_lifespan()

    def app(self, host: MountHost) -> ASGIApp:
        _quiet_client_mistakes()
        context = _Context()
        dispatchers = {
            name: JsonRpcDispatcher(AgentHandler(host.service, name, wait=self.wait), context_builder=context)
            for name in host.service.names()
        }

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            request = Request(scope, receive)
            agent, card = _route(route_path(scope))
            response = await _respond(host, dispatchers, request, agent, card)
            await response(scope, receive, send)

        return app


async def _respond(
    host: MountHost, dispatchers: dict[str, JsonRpcDispatcher], request: Request, agent: str | None, card: bool
) -> Response:
    method = request.method.upper()
    dispatcher = dispatchers.get(agent or "")
    if dispatcher is None or (card and method != "GET") or (not card and method != "POST"):
        served = ", ".join(f"/a2a/{n}" for n in dispatchers) or "none"
        return JSONResponse({"error": f"no A2A endpoint here (agents: {served})"}, status_code=404)
    try:
        request.scope[CALLER] = await host.caller(request.scope, agent or "")
        if card:
            return JSONResponse(agent_card_to_dict(agent_card(host, agent or "", str(request.url))))
    except InterlockError as exc:
        status = 401 if exc.status == "UNAUTHENTICATED" else 403 if exc.status == "PERMISSION_DENIED" else 400
        return JSONResponse(build_error_response(None, a2a_error(exc)), status_code=status)
    return await dispatcher.handle_requests(request)


def _route(path: str) -> tuple[str | None, bool]:
    """The agent a path names under the prefix, and whether it asks for the agent's card."""
    card = path.endswith(AGENT_CARD_WELL_KNOWN_PATH)
    if card:
        path = path[: -len(AGENT_CARD_WELL_KNOWN_PATH)]
    parts = path.rstrip("/").split("/")
    if len(parts) >= 2 and parts[-2] == "a2a":
        return parts[-1], card
    return None, card


def agent_card(host: MountHost, agent: str, url: str) -> AgentCard:
    """The card of ``agent``, its JSON-RPC endpoint at ``url`` (the card's own, without the well-known path)."""
    from ... import __version__

    try:
        info = host.service.describe(agent)
    except NotFoundError:
        raise
    endpoint = url.split("?")[0].removesuffix(AGENT_CARD_WELL_KNOWN_PATH)
    params = ParseDict({"dataPart": "interrupts", "answerPart": "answers"}, struct_pb2.Struct())
    extension = AgentExtension(uri=EXTENSION_URI, description=EXTENSION_DESCRIPTION, required=False, params=params)
    return AgentCard(
        name=info.name,
        description=info.description or f"the interlock agent {info.name}",
        version=__version__,
        supported_interfaces=[
            AgentInterface(url=endpoint, protocol_binding="JSONRPC", protocol_version=PROTOCOL_VERSION_1_0)
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False, extensions=[extension]),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[
            AgentSkill(id=info.name, name=info.name, description=info.description or info.name, tags=["interlock"])
        ],
    )


def a2a(*, prefix: str = "/a2a", wait: float = 300.0) -> A2A:
    """The A2A protocol mount for :class:`~interlock.http.AgentServer` (``protocols=[a2a()]``)."""
    return A2A(prefix=prefix, wait=wait)
