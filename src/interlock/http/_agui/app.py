"""``POST <prefix>/<agentName>``: one AG-UI run, answered as the SSE stream of its events.

Only what keeps a request from being a run is an HTTP status: another method (405), no agent
in the path (404), the context provider's refusal (its status, e.g. 401), a body over the
limit (413) or too slow (408). Everything after that is a ``200 text/event-stream``: a body
that is not a ``RunAgentInput``, an unknown agent or thread, every refusal of a resume and
every failure of the turn arrive as a ``RUN_ERROR`` event whose ``code`` is the canonical
status, as AG-UI's clients expect. Events are ``ag_ui.core`` models framed by
``ag_ui.encoder.EventEncoder``. A client that goes away does not stop a server-managed turn:
it runs on to its snapshot, unheard.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from ag_ui.core import BaseEvent, Interrupt, RunAgentInput
from ag_ui.encoder import EventEncoder

from ..._engine.io import AgentOutput
from ..._wire import state_to_json
from ...errors import InterlockError, InternalError, error_from_status
from .._asgi import (
    ClientGone,
    Receive,
    Reject,
    Scope,
    Send,
    json_body,
    read_body,
    read_headers,
    refuse_oversized,
    route_path,
)
from .._asgi import respond as respond_json
from .._mounts import MountHost
from .._service import Caller, acceptance
from .._status import error_body, http_status
from .events import Events, interrupt_of, run_error
from .runs import begin, parse_input

logger = logging.getLogger("interlock.http.agui")

_SSE = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]


class _Stream:
    """The response's event stream; once the client is gone, further events are dropped."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._encoder = EventEncoder()
        self.gone = False

    async def open(self) -> None:
        await self._send({"type": "http.response.start", "status": 200, "headers": _SSE})

    async def emit(self, events: Iterable[BaseEvent]) -> None:
        for event in events:
            if self.gone:
                return
            try:
                body = self._encoder.encode(event).encode("utf-8")
                await self._send({"type": "http.response.body", "body": body, "more_body": True})
            except OSError:
                self.gone = True

    async def close(self) -> None:
        if not self.gone:
            try:
                await self._send({"type": "http.response.body", "body": b"", "more_body": False})
            except OSError:
                self.gone = True


class AgUiApp:
    """The ASGI app of :class:`~interlock.http._agui.AGUI` over ``host`` (see the module's docs)."""

    def __init__(self, host: MountHost, prefix: str) -> None:
        self.host = host
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("method") != "POST":
            error = InterlockError("AG-UI runs are POSTed: POST a RunAgentInput", status="UNIMPLEMENTED")
            await respond_json(send, 405, error_body(error), [(b"allow", b"POST")])
            return
        _, sep, agent = route_path(scope).rpartition(self.prefix + "/")
        if not sep or not agent or "/" in agent:
            error = InterlockError(f"POST {self.prefix}/<agentName>; no agent is named here", status="NOT_FOUND")
            await respond_json(send, 404, error_body(error), [])
            return
        try:
            caller = await self.host.caller(scope, agent)
            headers = read_headers(scope)
            if await refuse_oversized(
                headers, receive, send, limit=self.host.max_body, timeout=self.host.body_timeout, extra=[]
            ):
                return
            body = await read_body(headers, receive, self.host.max_body, self.host.body_timeout)
        except ClientGone:
            return
        except Reject as refused:
            await respond_json(send, refused.code, error_body(refused.error), refused.headers)
            return
        except InterlockError as exc:
            await respond_json(send, http_status(exc), error_body(exc), [])
            return
        stream = _Stream(send)
        await stream.open()
        await self._run(stream, agent, body, caller)
        await stream.close()

    async def _run(self, stream: _Stream, agent: str, body: bytes, caller: Caller) -> None:
        try:
            run = parse_input(_json(body))
        except InterlockError as exc:
            await stream.emit([run_error(exc)])
            return
        events = Events(run.thread_id, run.run_id)
        await stream.emit([events.started()])
        try:
            await self._turn(stream, events, agent, run, caller)
        except InterlockError as exc:
            await stream.emit(events.failed(exc))
        except Exception:
            logger.exception("AG-UI run %s of agent %s failed", run.run_id, agent)
            await stream.emit(events.failed(InternalError("the run failed inside the server; see its log")))

    async def _turn(self, stream: _Stream, events: Events, agent: str, run: RunAgentInput, caller: Caller) -> None:
        events.client = self.host.service.describe(agent).state_management == "client"
        turn = await begin(self.host.service, agent, run, caller)
        async for chunk in turn:
            await stream.emit(events.chunk(chunk))
        output = await turn.output()
        if output.error is not None:
            error = output.error
            await stream.emit(events.failed(error_from_status(error.status, error.message, details=error.details)))
            return
        await stream.emit(events.reply(output.message))
        await stream.emit(events.state(await self._state(events, agent, output, caller)))
        if output.finish_reason != "interrupted":
            await stream.emit(events.finished())
            return
        service = self.host.service
        if events.client:
            items = service.pending_in(agent, output.state) if output.state is not None else []
        else:
            items = await service.pending(agent, snapshot_id=output.snapshot_id, caller=caller)
        if not items:  # answered already (another client was quicker than this stream)
            await stream.emit(events.finished())
            return
        interrupts: list[Interrupt] = []
        for item in items:
            answers = service.options(agent, item)
            interrupts.append(interrupt_of(item, acceptance(answers), answers))
        await stream.emit(events.paused(interrupts))

    async def _state(self, events: Events, agent: str, output: AgentOutput, caller: Caller) -> object:
        """The state the client keeps: a client-managed agent's whole session (signed as it came), else the custom."""
        if events.client:
            return state_to_json(output.state) if output.state is not None else None
        if output.snapshot_id is None:
            return None
        snap = await self.host.service.read(agent, snapshot_id=output.snapshot_id, caller=caller)
        return snap.state.custom if snap.state is not None else None


def _json(body: bytes) -> object:
    try:
        return json_body(body)
    except Reject as refused:
        raise refused.error from None
