"""Drive an agent served over HTTP (by interlock or by Genkit) through the local agent interface.

::

    async with RemoteAgent("http://127.0.0.1:8000/approvals") as agent:
        output = await agent.run("move 100 to savings")
        if output.interrupts:
            ...

:class:`RemoteAgent` has the interface of :class:`~interlock.Agent`: ``connect`` (send,
resume, detach, iterate chunks, output), ``run``, ``get_snapshot``, ``abort``, ``wait``,
``pending_interrupts`` and ``load``. Over HTTP one request carries one input, so a
connection sends its inputs one request at a time, each continuing from the previous
output (its ``snapshotId`` for server-managed agents, its ``state`` for client-managed ones).
Errors arrive as the typed interlock errors, whatever form the server wrote them in.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Literal, cast

import httpx

from .._engine.io import END, AgentInit, AgentInput, AgentOutput, BaseConnection, StreamChunk, Waiting
from .._json_object import is_object
from .._wire import chunk_from_json, init_to_json, input_to_json, output_from_json, snapshot_from_json
from ..agents._interface import AgentAPI
from ..errors import (
    DeadlineExceededError,
    InterlockError,
    InternalError,
    InvalidArgumentError,
    SnapshotNotFoundError,
    UnavailableError,
    UsageError,
)
from ..records._sessions import ErrorInfo, SessionState, Snapshot
from ..telemetry._otel import outgoing_trace
from ._sse import EventParser, encode
from ._status import error_from_http, error_from_wire

HeadersProvider = dict[str, str] | Callable[[], "dict[str, str] | Awaitable[dict[str, str]]"]
"""Static headers, or a function (sync or async) called before every request (e.g. to refresh a token)."""


def _http_error(exc: Exception, url: str) -> InterlockError:
    if isinstance(exc, httpx.TimeoutException):
        return DeadlineExceededError(f"HTTP request to {url} timed out: {exc}")
    if isinstance(exc, httpx.WriteError):  # the server closed the connection while we were still sending
        return UnavailableError(
            f"HTTP request to {url} failed while sending its body ({exc or type(exc).__name__}); "
            "the server may have refused it (e.g. as larger than its limit)"
        )
    return UnavailableError(f"HTTP request to {url} failed: {exc or type(exc).__name__}")


def _pure_detach(input: AgentInput) -> bool:
    return input.detach and input.message is None and input.resume is None


class RemoteAgent(AgentAPI):
    """An agent served over HTTP, with the interface of a local :class:`~interlock.Agent`.

    Args:
        url: the agent's turn endpoint, e.g. ``http://host/api/myAgent``.
        headers: static headers, or a function returning them (sync or async), sent with
            every request (authentication rides here: the server builds the context).
        state_management: ``"server"`` (the server keeps snapshots) or ``"client"`` (the
            output carries the state and the connection sends it back).
        get_snapshot_url: defaults to ``<url>/getSnapshot``.
        abort_url: defaults to ``<url>/abort``.
        http: an ``httpx.AsyncClient`` to use (you close it); by default one is created
            and closed by :meth:`aclose` / ``async with``.
        timeout: seconds for connecting and for snapshot/abort requests; a streamed turn
            has no read timeout (the server ends every stream with a final frame).
    """

    wait_interval = 0.25

    def __init__(
        self,
        url: str,
        *,
        headers: HeadersProvider | None = None,
        state_management: Literal["server", "client"] = "server",
        get_snapshot_url: str | None = None,
        abort_url: str | None = None,
        http: httpx.AsyncClient | None = None,
        timeout: float | None = 30.0,
    ) -> None:
        if state_management not in ("server", "client"):
            raise UsageError(f"state_management must be 'server' or 'client', not {state_management!r}")
        self.url = url
        self.name = httpx.URL(url).path.rstrip("/").rsplit("/", 1)[-1]
        self.headers = headers
        self.state_management: Literal["server", "client"] = state_management
        self.get_snapshot_url = get_snapshot_url or f"{url.rstrip('/')}/getSnapshot"
        self.abort_url = abort_url or f"{url.rstrip('/')}/abort"
        self.wait_url = f"{self.get_snapshot_url.rsplit('/', 1)[0]}/waitForSnapshot"
        """interlock's long poll beside ``getSnapshot``: answered when the snapshot settles."""
        self._long_poll: bool | None = None  # None: not tried yet; False: the server has no waitForSnapshot
        self.timeout = timeout
        self._http = http
        self._own_http = http is None

    def __repr__(self) -> str:
        return f"RemoteAgent({self.url!r}, state_management={self.state_management!r})"

    async def aclose(self) -> None:
        """Close the HTTP client this agent created (a client passed in stays open)."""
        if self._own_http and self._http is not None:
            client, self._http = self._http, None
            await client.aclose()

    async def __aenter__(self) -> RemoteAgent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # the agent interface -------------------------------------------------------------------

    def connect(
        self,
        *,
        snapshot_id: str | None = None,
        session_id: str | None = None,
        state: SessionState | None = None,
        context: dict[str, Any] | None = None,
    ) -> RemoteConnection:
        """Open a connection; the session comes from a snapshot, a session id, state, or is new.

        ``context`` is accepted for parity with local agents and ignored: over HTTP the
        server derives the context from the request (send credentials in ``headers``).
        """
        return RemoteConnection(self, AgentInit(snapshot_id=snapshot_id, session_id=session_id, state=state))

    async def load(
        self, snapshot_id: str | None = None, *, session_id: str | None = None, context: dict[str, Any] | None = None
    ) -> RemoteConnection:
        """A connection continuing a stored session; its ``snapshot`` is what was loaded.

        Raises:
            SnapshotNotFoundError: no such snapshot (or session).
        """
        if self.state_management == "client":
            raise UsageError(f"agent {self.name!r} is client-managed; connect with state= instead of loading")
        snap = await self.get_snapshot(snapshot_id, session_id=session_id)
        conn = self.connect(snapshot_id=snap.snapshot_id) if snapshot_id else self.connect(session_id=session_id)
        conn.snapshot = snap
        return conn

    async def get_snapshot(
        self, snapshot_id: str | None = None, *, session_id: str | None = None, context: dict[str, Any] | None = None
    ) -> Snapshot:
        """A stored snapshot by id, or a session's latest; raises :class:`SnapshotNotFoundError` on HTTP 404.

        With both ids the server checks that the snapshot belongs to the session (an
        interlock server does; Genkit servers refuse both ids).
        """
        if not snapshot_id and not session_id:
            raise InvalidArgumentError("get_snapshot needs a snapshot_id or a session_id")
        data = {"snapshotId": snapshot_id} if snapshot_id else {}
        data |= {"sessionId": session_id} if session_id else {}
        result = await self._post(self.get_snapshot_url, data)
        if result is None:
            raise SnapshotNotFoundError(f"Snapshot {snapshot_id or session_id!r} not found at {self.get_snapshot_url}")
        return snapshot_from_json(result)

    async def abort(self, snapshot_id: str, *, context: dict[str, Any] | None = None) -> str | None:
        """Abort a detached turn; returns the snapshot's status before the abort, or ``None``."""
        result = await self._post(self.abort_url, {"snapshotId": snapshot_id})
        status = result.get("status") if is_object(result) else None
        return status if isinstance(status, str) else None

    async def changed(
        self,
        snap: Snapshot,
        *,
        timeout: float | None = None,
        interval: float | None = None,
        context: dict[str, Any] | None = None,
    ) -> None:
        """Return once ``snap``'s status may have changed, or after ``timeout`` seconds.

        An interlock server answers ``waitForSnapshot`` once the snapshot settles (woken by its
        store: a commit by any process answers at once), so one request replaces the polls. A
        server without it (a Genkit server answers 404) is polled every ``interval`` (default
        :attr:`wait_interval`), as is every wait given an ``interval``.
        """
        if interval is None and self._long_poll is not False:
            try:
                async with asyncio.timeout(timeout):
                    # no read timeout: the server answers within its wait_timeout, settled or not
                    found = await self._post(self.wait_url, {"snapshotId": snap.snapshot_id}, long=True)
            except TimeoutError:
                return
            if found is not None:
                self._long_poll = True
                return
            if self._long_poll is None:  # 404 on the first try: no such route here (a vanished snapshot: the
                self._long_poll = False  # caller's next read says so)
        await super().changed(snap, timeout=timeout, interval=interval, context=context)

    # HTTP ----------------------------------------------------------------------------------

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=self.timeout)
        return self._http

    async def _headers(self, **fixed: str) -> dict[str, str]:
        provided: Any = self.headers() if callable(self.headers) else dict(self.headers or {})
        if inspect.isawaitable(provided):
            provided = await provided
        overridden = {name.lower() for name in fixed}
        kept = {k: v for k, v in cast(dict[str, str], provided).items() if k.lower() not in overridden}
        return kept | outgoing_trace() | fixed

    async def _post(self, url: str, data: dict[str, Any], *, long: bool = False) -> Any:
        """POST ``{"data": data}``; the result, or ``None`` on 404 (``long``: no read timeout, a long poll)."""
        headers = await self._headers(**{"Content-Type": "application/json", "Accept": "application/json"})
        timeout: Any = httpx.Timeout(self.timeout, read=None) if long else httpx.USE_CLIENT_DEFAULT
        try:
            response = await self._client().post(url, content=encode({"data": data}), headers=headers, timeout=timeout)
        except httpx.HTTPError as exc:
            raise _http_error(exc, url) from exc
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise error_from_http(response.status_code, response.content)
        if not response.content.strip():
            return None
        try:
            body: Any = response.json()
        except ValueError:
            raise InternalError(f"{url} answered with a body that is not JSON: {response.text[:200]!r}") from None
        if not is_object(body):
            return body
        d = body
        if "error" in d:
            raise error_from_wire(d["error"], response.status_code)
        return d["result"] if "result" in d else d

    async def request_turn(
        self, input: AgentInput, init: AgentInit, on_chunk: Callable[[StreamChunk], None] | None = None
    ) -> AgentOutput:
        """One streamed turn request: ``on_chunk`` gets each chunk; returns the output or raises."""
        payload = {"data": input_to_json(input), "init": init_to_json(init)}
        headers = await self._headers(**{"Accept": "text/event-stream", "Content-Type": "application/json"})
        timeout = httpx.Timeout(self.timeout, read=None)
        try:
            async with self._client().stream(
                "POST", self.url, content=encode(payload), headers=headers, timeout=timeout
            ) as response:
                if response.status_code != 200:
                    raise error_from_http(response.status_code, await response.aread())
                events = EventParser()
                async for raw in response.aiter_bytes():
                    for event in events.feed(raw):
                        if (output := read_event(event, on_chunk)) is not None:
                            return output
                for event in events.feed(b"", final=True):
                    if (output := read_event(event, on_chunk)) is not None:
                        return output
        except httpx.HTTPError as exc:
            raise _http_error(exc, self.url) from exc
        raise UnavailableError(f"the HTTP stream from {self.url} ended before the turn's result")


class RemoteConnection(BaseConnection):
    """A connection to a remote agent: send inputs, iterate stream chunks, take the output.

    Inputs go out one HTTP request each, in order, once the next input is known (or the
    connection is closed, or you start iterating): a detach-only input that follows a
    message is merged into that message's request, so a long turn can be detached. The
    chunks of all requests stream in order; :meth:`output` is the last request's output.
    A failed or detached output ends the connection (later inputs are not sent).

    Attributes:
        snapshot: the snapshot :meth:`RemoteAgent.load` started from, if any.
    """

    def __init__(self, agent: RemoteAgent, init: AgentInit) -> None:
        super().__init__(Waiting(), asyncio.get_running_loop().create_future())
        self._agent = agent
        self._init = init
        self._inputs: list[AgentInput] = []
        self._demand = False
        self._wake = asyncio.Event()
        self._output.add_done_callback(_retrieve)
        self._worker: asyncio.Task[None] | None = None
        self._last: AgentOutput | None = None
        self.snapshot: Snapshot | None = None

    def __aiter__(self) -> AsyncIterator[StreamChunk]:
        self._demand = True
        self._kick()
        return self._stream()

    def cancel(self) -> None:
        """Stop now: the request in flight is dropped (a server-managed turn still runs to its snapshot)."""
        if self._worker is None:
            self._finish(self._cancelled())
        elif not self._worker.done():
            self._worker.cancel()

    def _put(self, input: AgentInput) -> None:
        self._inputs.append(input)
        self._kick()

    def _end_inputs(self) -> None:
        self._kick()

    # the worker ----------------------------------------------------------------------------

    def _kick(self) -> None:
        if self._worker is None and not self._output.done():
            self._worker = asyncio.ensure_future(self._run())
        self._wake.set()

    def _ready(self) -> bool:
        return len(self._inputs) >= 2 or self._closed or (bool(self._inputs) and self._demand)

    async def _run(self) -> None:
        init = self._init
        try:
            while True:
                while not self._ready():
                    self._wake.clear()
                    await self._wake.wait()
                if not self._inputs:
                    break
                item = self._inputs.pop(0)
                if self._inputs and _pure_detach(self._inputs[0]) and not _pure_detach(item):
                    self._inputs.pop(0)
                    item = dataclasses.replace(item, detach=True)
                self._last = await self._agent.request_turn(item, init, self._chunks.put_nowait)
                if self._last.error is not None or self._last.finish_reason == "detached":
                    break
                init = self._next_init(init, self._last)
            self._finish(self._last or self._nothing())
        except asyncio.CancelledError:
            self._finish(self._cancelled())
        except Exception as exc:
            self._finish(exc)

    def _next_init(self, init: AgentInit, last: AgentOutput) -> AgentInit:
        if self._agent.state_management == "server":
            return AgentInit(snapshot_id=last.snapshot_id) if last.snapshot_id else init
        return AgentInit(state=last.state) if last.state is not None else init

    def _nothing(self) -> AgentOutput:
        init = self._init
        session = init.session_id or (init.state.session_id if init.state else None)
        return AgentOutput(session_id=session, snapshot_id=init.snapshot_id, state=init.state)

    def _cancelled(self) -> AgentOutput:
        last = self._last or self._nothing()
        error = ErrorInfo(status="CANCELLED", message="the invocation was cancelled")
        return dataclasses.replace(last, finish_reason="failed", error=error)

    def _finish(self, outcome: AgentOutput | BaseException) -> None:
        if not self._output.done():
            if isinstance(outcome, AgentOutput):
                self._output.set_result(outcome)
            else:
                self._output.set_exception(outcome)
        self._chunks.put_nowait(END)


def _retrieve(future: asyncio.Future[AgentOutput]) -> None:
    if not future.cancelled():
        future.exception()  # an error nobody asked for is not worth a "never retrieved" log


def read_event(event: str, on_chunk: Callable[[StreamChunk], None] | None) -> AgentOutput | None:
    """Handle one stream event: a chunk goes to ``on_chunk``, a result is returned, an error raised."""
    try:
        payload: Any = json.loads(event)
    except ValueError:
        raise InternalError(f"unreadable stream frame: {event[:200]!r}") from None
    if not is_object(payload):
        raise InternalError(f"unexpected stream frame: {event[:200]!r}")
    d = payload
    if "result" in d:
        return output_from_json(d["result"] or {})
    if "error" in d:
        raise error_from_wire(d["error"])
    chunk = chunk_from_json(d["message"] if "message" in d else d)
    if on_chunk is not None:
        on_chunk(chunk)
    return None
