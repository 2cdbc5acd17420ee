r"""Serve agents over Genkit's HTTP protocol, as a pure ASGI app (no web framework).

Routes, all ``POST``, for each agent ``<name>`` under ``base_path``::

    <base>/<name>                   a turn: {"data": AgentInput, "init": AgentInit}
    <base>/<name>/getSnapshot       {"data": {"snapshotId"} | {"sessionId"} | both}
    <base>/<name>/abort             {"data": {"snapshotId"}}
    <base>/<name>/waitForSnapshot   {"data": {"snapshotId"}}: answers once the snapshot settles

and ``GET <base>/healthz``, whether every agent's store takes writes now
(:mod:`interlock.http._health`). Mounted in another ASGI app (FastAPI's ``mount``, Starlette's
``Mount``), the server routes the path below its mount point (the ASGI ``root_path``), so
``app.mount("/agents", server)`` serves ``/agents/<name>`` without a ``base_path``.

A turn streams when ``Accept`` contains ``text/event-stream`` or the query has
``stream=true``. Every frame is exactly ``data: <one-line ASCII JSON>\n\n``: zero or more
``{"message": chunk}`` frames, then exactly one ``{"result": output}`` or
``{"error": {status, message, details?}}``, also when the turn crashes or is cancelled.
Mistakes in the request (bad JSON, wrong types, unknown agent, oversized body, ``state``
together with an id) are answered ``4xx {status, message}`` before any agent work; the
agent's own refusals (e.g. ``state`` sent to a server-managed agent) arrive as an error
frame, which both Genkit clients turn into an error with the right status.

If the client goes away mid-turn, a server-managed turn runs on to its snapshot and a
client-managed one (whose state would be lost anyway) is cancelled. Each turn is logged
on the ``interlock.http.server`` logger.

Run it with any ASGI server: ``uvicorn.run(AgentServer([agent]))`` or
``interlock serve module:agent``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import parse_qsl

from .._engine.io import AgentInput, AgentOutput
from .._json_object import is_object
from .._wire import chunk_to_json, init_from_json, input_from_json, output_to_json, snapshot_to_json
from ..agents._agent import Agent
from ..errors import (
    CancelledError,
    InterlockError,
    InternalError,
    NotFoundError,
    PermissionDeniedError,
    UnimplementedError,
)
from ..records._sessions import Snapshot
from ..telemetry._otel import incoming_trace
from ._asgi import (
    Action,
    ASGIMessage,
    ClientGone,
    Headers,
    Receive,
    Reject,
    RequestInfo,
    Scope,
    Send,
    bad,
    disconnected,
    json_body,
    parse,
    read_body,
    read_headers,
    refuse_oversized,
    respond,
    route_path,
    send_body,
    string_field,
)
from ._health import HEALTH_ROUTE, health_report
from ._mounts import MountHost, ProtocolMount, mounted
from ._service import Caller, RunningTurn, ServedAgents
from ._sse import encode, frame
from ._status import error_body, http_status

logger = logging.getLogger("interlock.http.server")

ContextProvider = Callable[[RequestInfo], "dict[str, Any] | Awaitable[dict[str, Any]]"]
"""Turns a request into the agent context (``identity``, ``tenant``, ...); raise an
:class:`~interlock.errors.InterlockError` (e.g. ``UnauthenticatedError``) to refuse it."""

_COMPANIONS = ("getSnapshot", "abort", "waitForSnapshot")
_SSE: Headers = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]
_ALLOWED_HEADERS = "Content-Type, Accept, Authorization, X-Genkit-Stream-Id"


@dataclass(kw_only=True, slots=True)
class _Turn:
    """Bookkeeping of one turn request."""

    agent: Agent
    conn: RunningTurn
    started: float
    settled: bool = False


class AgentServer:
    """An ASGI app serving agents over Genkit's HTTP protocol.

    It is the Genkit adapter of the protocol seam: each route translates Genkit JSON into
    the typed values of :class:`~interlock.http._service.AgentService` (``service``, over
    ``agents``) and back; the context provider's dict becomes the
    :class:`~interlock.http._service.Caller`.

    Args:
        agents: one agent, several, or a mapping of URL name to agent (kept as the
            mutable ``agents`` dict).
        base_path: prefix of every route, e.g. ``"/api"``.
        context: turns each request into the context the agent gets (the agent scopes
            every store read and write by ``context["tenant"]``).
        cors_origins: origins allowed to call from a browser (``"*"`` for any).
        cors_headers: request headers allowed besides Content-Type, Accept, Authorization.
        max_body: largest accepted request body in bytes (larger: 413 RESOURCE_EXHAUSTED).
        wait_timeout: longest a ``waitForSnapshot`` request blocks, in seconds (it stops
            early when the client disconnects).
        body_timeout: seconds a request body may take to arrive (e.g. a ``Content-Length``
            larger than the body sent); later: 408 DEADLINE_EXCEEDED and the connection closed.
        health_timeout: seconds the health route waits for each store (later: 503, DEADLINE_EXCEEDED).
        protocols: wire protocols served beside the Genkit routes, each under its own prefix
            (:class:`~interlock.http._mounts.ProtocolMount`: MCP, AG-UI, A2A), over the same
            agents, context provider and body limits.
    """

    def __init__(
        self,
        agents: Agent | Iterable[Agent] | Mapping[str, Agent],
        *,
        base_path: str = "",
        context: ContextProvider | None = None,
        cors_origins: Iterable[str] = (),
        cors_headers: Iterable[str] = (),
        max_body: int = 10_000_000,
        wait_timeout: float = 30.0,
        body_timeout: float = 30.0,
        health_timeout: float = 5.0,
        protocols: Iterable[ProtocolMount] = (),
    ) -> None:
        if isinstance(agents, Agent):
            agents = [agents]
        self.agents: dict[str, Agent] = (
            dict(cast(Mapping[str, Agent], agents)) if isinstance(agents, Mapping) else {a.name: a for a in agents}
        )
        self.service = ServedAgents(self.agents)
        self.base_path = "/" + base_path.strip("/") if base_path.strip("/") else ""
        self.context = context
        self.cors_origins = frozenset(cors_origins)
        self.cors_headers = ", ".join([_ALLOWED_HEADERS, *cors_headers])
        self.max_body = max_body
        self.wait_timeout = wait_timeout
        self.body_timeout = body_timeout
        self.health_timeout = health_timeout
        self._followers: set[asyncio.Task[Any]] = set()
        self.protocols = list(protocols)
        host = MountHost(service=self.service, caller=self._caller, max_body=max_body, body_timeout=body_timeout)
        self._mounts = {"/" + p.prefix.strip("/"): p.app(host) for p in self.protocols}

    def __repr__(self) -> str:
        return f"AgentServer({sorted(self.agents)!r}, base_path={self.base_path!r})"

    async def aclose(self) -> None:
        """Stop following turns whose client went away (the turns themselves run on)."""
        tasks = list(self._followers)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # ASGI --------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            app = mounted(route_path(scope), self.base_path, self._mounts) if self._mounts else None
            await (app or self._http)(scope, receive, send)
        elif kind == "lifespan":
            async with contextlib.AsyncExitStack() as running:
                while (message := await receive())["type"] != "lifespan.shutdown":
                    if message["type"] == "lifespan.startup":
                        for protocol in self.protocols:
                            await running.enter_async_context(protocol.lifespan())
                        await send({"type": "lifespan.startup.complete"})
                await self.aclose()
            await send({"type": "lifespan.shutdown.complete"})
        elif kind == "websocket":
            await send({"type": "websocket.close", "code": 1008})

    async def _http(self, scope: Scope, receive: Receive, raw_send: Send) -> None:
        started = False

        async def send(message: ASGIMessage) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await raw_send(message)

        headers = read_headers(scope)
        cors = self._cors(headers.get("origin"))
        path = route_path(scope)
        try:
            method = str(scope.get("method") or "GET").upper()
            if method == "GET" and path == f"{self.base_path}/{HEALTH_ROUTE}":
                body, code = await health_report(self.agents, timeout=self.health_timeout)
                await respond(send, code, body, cors)
                return
            name, agent, action = self._route(path)
            if method == "OPTIONS":
                await self._preflight(headers, cors, send)
                return
            if method != "POST":
                allow = [(b"allow", b"POST, OPTIONS")]
                raise Reject(UnimplementedError(f"{method} is not supported; use POST"), code=405, headers=allow)
            if await refuse_oversized(
                headers, receive, send, limit=self.max_body, timeout=self.body_timeout, extra=cors
            ):
                return
            body = await read_body(headers, receive, self.max_body, self.body_timeout)
            query = dict(parse_qsl(bytes(scope.get("query_string") or b"").decode("latin-1")))
            client = cast("tuple[str, int] | None", scope.get("client"))
            info = RequestInfo(
                method=method, path=path, headers=headers, query=query, client=client, agent=agent.name, action=action
            )
            caller = Caller.of(await self._context_for(info))
            payload = json_body(body)
            if action == "turn":
                accept, flag = headers.get("accept", ""), query.get("stream", "").lower()
                stream = "text/event-stream" in accept or flag in ("true", "1")
                with incoming_trace(headers):  # a traced caller's span becomes the parent of the turn's
                    await self._turn(name, payload, caller, stream=stream, cors=cors, receive=receive, send=send)
            else:
                result, code = await self._companion(name, action, payload, caller, receive)
                await respond(send, code, result, cors)
        except ClientGone:
            return
        except Reject as reject:
            await respond(send, reject.code, error_body(reject.error), cors + reject.headers)
        except InterlockError as exc:  # a refusal that was not wrapped: still the caller's answer, not a 500
            if not started:
                await respond(send, http_status(exc), error_body(exc), cors)
        except Exception:
            logger.exception("unexpected error serving %s", path)
            if not started:
                await respond(send, 500, error_body(InternalError("Internal error")), cors)

    def _route(self, path: str) -> tuple[str, Agent, Action]:
        base = self.base_path
        if base and not (path == base or path.startswith(base + "/")):
            raise Reject(NotFoundError(f"no agent at {path!r}"))
        rest = path[len(base) :].strip("/")
        head, _, tail = rest.rpartition("/")
        if head and tail in _COMPANIONS and head in self.agents:
            return head, self.agents[head], cast(Action, tail)
        if rest in self.agents:
            return rest, self.agents[rest], "turn"
        raise Reject(NotFoundError(f"no agent at {path!r}"))

    def _cors(self, origin: str | None) -> Headers:
        if not origin or not self.cors_origins:
            return []
        if "*" in self.cors_origins:
            return [(b"access-control-allow-origin", b"*")]
        if origin in self.cors_origins:
            return [(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"Origin")]
        return []

    async def _preflight(self, headers: Mapping[str, str], cors: Headers, send: Send) -> None:
        if "origin" in headers and not cors:
            raise Reject(PermissionDeniedError(f"origin {headers['origin']!r} is not allowed"))
        allow = [
            (b"allow", b"POST, OPTIONS"),
            (b"access-control-allow-methods", b"POST, OPTIONS"),
            (b"access-control-allow-headers", self.cors_headers.encode("latin-1")),
            (b"access-control-max-age", b"600"),
        ]
        await send({"type": "http.response.start", "status": 204, "headers": cors + allow})
        await send({"type": "http.response.body", "body": b""})

    async def _caller(self, scope: Scope, agent: str) -> Caller:
        """The caller of a mounted protocol's request (see :class:`~interlock.http._mounts.MountHost`)."""
        path, name = route_path(scope), self._protocol_of(route_path(scope))
        query = dict(parse_qsl(bytes(scope.get("query_string") or b"").decode("latin-1")))
        method, client = str(scope.get("method") or "GET").upper(), cast("tuple[str, int] | None", scope.get("client"))
        info = RequestInfo(
            method=method, path=path, headers=read_headers(scope), query=query, client=client, agent=agent, action=name
        )
        try:
            return Caller.of(await self._context_for(info))
        except Reject as reject:
            raise reject.error from None

    def _protocol_of(self, path: str) -> Action:
        for protocol in self.protocols:
            if mounted(path, self.base_path, {"/" + protocol.prefix.strip("/"): self._http}):
                return protocol.name
        raise NotFoundError(f"no protocol is served at {path!r}")

    async def _context_for(self, info: RequestInfo) -> dict[str, Any]:
        if self.context is None:
            return {}
        try:
            value: Any = self.context(info)
            if inspect.isawaitable(value):
                value = await value
        except InterlockError as exc:
            raise Reject(exc) from None
        if not is_object(value):
            raise TypeError(f"the context provider returned {type(value).__name__}, not a dict")
        return dict(value)

    # companions --------------------------------------------------------------------------

    async def _companion(
        self, name: str, action: Action, payload: dict[str, Any], caller: Caller, receive: Receive
    ) -> tuple[dict[str, Any], int]:
        data: object = payload.get("data")
        if not is_object(data):
            raise bad(f'{action} takes {{"data": {{"snapshotId": ...}}}}')
        snapshot_id, session_id = string_field(data, "snapshotId"), string_field(data, "sessionId")
        try:
            if action == "abort":
                if snapshot_id is None:
                    raise bad("abort needs a 'snapshotId'")
                previous = await self.service.abort(name, snapshot_id, caller=caller)
                return {"result": {"snapshotId": snapshot_id} | ({"status": previous} if previous else {})}, 200
            if snapshot_id is None and session_id is None:
                raise bad(f"{action} needs a 'snapshotId' or a 'sessionId'")
            if action == "waitForSnapshot":
                snap = await self._wait(name, snapshot_id, session_id, caller, receive)
            else:
                snap = await self.service.read(name, snapshot_id=snapshot_id, session_id=session_id, caller=caller)
        except NotFoundError:
            agent = self.agents[name].name
            missing = NotFoundError(f"Snapshot '{snapshot_id or session_id}' not found for agent '{agent}'.")
            return error_body(missing), 404
        except InterlockError as exc:
            raise Reject(exc) from None
        return {"result": snapshot_to_json(snap)}, 200

    async def _wait(
        self, name: str, snapshot_id: str | None, session_id: str | None, caller: Caller, receive: Receive
    ) -> Snapshot:
        """The service's wait, for at most ``wait_timeout``, or until the client goes away (ClientGone)."""
        gone = asyncio.ensure_future(disconnected(receive))
        waiting = asyncio.ensure_future(
            self.service.wait(
                name, snapshot_id=snapshot_id, session_id=session_id, timeout=self.wait_timeout, caller=caller
            )
        )
        try:
            await asyncio.wait({gone, waiting}, return_when=asyncio.FIRST_COMPLETED)
            if not waiting.done():
                raise ClientGone
            return waiting.result()
        finally:
            for task in (gone, waiting):
                task.cancel()
            await asyncio.gather(gone, waiting, return_exceptions=True)

    # turns -------------------------------------------------------------------------------

    async def _turn(
        self,
        name: str,
        payload: dict[str, Any],
        caller: Caller,
        *,
        stream: bool,
        cors: Headers,
        receive: Receive,
        send: Send,
    ) -> None:
        input = cast(AgentInput, parse(input_from_json, payload.get("data"), "data (an AgentInput)"))
        init = parse(init_from_json, payload.get("init"), "init (an AgentInit)")
        try:
            conn = await self.service.start(name, input, init, caller=caller)
        except InterlockError as exc:  # refused before any agent work: a 4xx, not an error frame
            raise Reject(exc) from None
        turn = _Turn(agent=self.agents[name], conn=conn, started=time.monotonic())
        pump = asyncio.ensure_future(self._stream(turn, cors, send) if stream else self._plain(turn, cors, send))
        watcher = asyncio.ensure_future(disconnected(receive))
        try:
            await asyncio.wait({pump, watcher}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watcher.cancel()
            if not pump.done():
                pump.cancel()
            await asyncio.gather(pump, watcher, return_exceptions=True)
            if not turn.settled:
                self._follow(turn)

    async def _stream(self, turn: _Turn, cors: Headers, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": _SSE + cors})
        ended = False
        try:
            try:
                async for chunk in turn.conn:
                    await send_body(send, frame({"message": chunk_to_json(chunk)}), more=True)
                final = frame({"result": output_to_json(await self._output(turn))})
            except Exception as exc:
                final = frame({"error": self._failure(turn, exc)})
            await send_body(send, final, more=False)
            ended = True
        except asyncio.CancelledError:
            if not ended:  # the stream still ends with exactly one final frame
                stop = {"status": "CANCELLED", "message": "the turn's HTTP request was cancelled"}
                with contextlib.suppress(Exception):
                    await send_body(send, frame({"error": stop}), more=False)
            raise

    async def _plain(self, turn: _Turn, cors: Headers, send: Send) -> None:
        try:
            body, code = encode({"result": output_to_json(await self._output(turn))}), 200
        except Exception as exc:
            body = encode(self._failure(turn, exc))
            code = http_status(exc)
        await respond(send, code, body, cors)

    def _failure(self, turn: _Turn, exc: Exception) -> dict[str, Any]:
        if not isinstance(exc, InterlockError):
            logger.error("turn of agent %r failed", turn.agent.name, exc_info=exc)
        return error_body(exc)

    async def _output(self, turn: _Turn) -> AgentOutput:
        try:
            output = await turn.conn.output()
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # we are being cancelled; the turn itself is not settled
            turn.settled = True
            self._log(turn, None, CancelledError("the turn was cancelled"))
            raise CancelledError("the turn was cancelled") from None
        except Exception as exc:
            turn.settled = True
            self._log(turn, None, exc)
            raise
        turn.settled = True
        self._log(turn, output, None)
        return output

    def _follow(self, turn: _Turn) -> None:
        """The client went away (or the response broke): a client-managed turn stops, a stored one runs on."""

        async def follow() -> None:
            client_managed = turn.agent.state_management == "client"
            if client_managed:
                turn.conn.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(self._output(turn), timeout=30.0 if client_managed else None)

        task = asyncio.ensure_future(follow())
        self._followers.add(task)
        task.add_done_callback(self._followers.discard)

    def _log(self, turn: _Turn, output: AgentOutput | None, error: BaseException | None) -> None:
        if output is not None:
            finish = output.finish_reason or ("failed" if output.error else "-")
            finish += f"({output.error.status})" if output.error else ""
        else:
            finish = f"error({error.status if isinstance(error, InterlockError) else type(error).__name__})"
        session, snapshot = (output.session_id, output.snapshot_id) if output else (None, None)
        duration = round((time.monotonic() - turn.started) * 1000)
        logger.info(
            "turn agent=%s session=%s snapshot=%s finish=%s duration_ms=%d",
            turn.agent.name,
            session or "-",
            snapshot or "-",
            finish,
            duration,
            extra={"agent": turn.agent.name, "session_id": session, "snapshot_id": snapshot}
            | {"finish_reason": finish, "duration_ms": duration},
        )
