"""A tiny replay server: real HTTP on 127.0.0.1 that answers with scripted provider bodies.

Tests queue replies (a JSON body, or the frames of an SSE stream read from a fixture
file), point a provider SDK at :attr:`ReplayServer.url` and then inspect
:attr:`ReplayServer.received` to see exactly what the SDK sent over the wire.
The app is plain ASGI served by uvicorn in a background thread.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Self

import uvicorn

HERE = pathlib.Path(__file__).resolve().parent

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def fixture(name: str) -> bytes:
    """The raw bytes of a recorded body, e.g. ``fixture("openai/chat_text.json")``."""
    return (HERE / name).read_bytes()


def sse_frames(raw: bytes) -> list[bytes]:
    """Split a recorded SSE body into its frames, each keeping its own blank-line terminator."""
    return re.findall(rb".*?(?:\r\n\r\n|\n\n)", raw, re.S)


@dataclass
class Reply:
    """One scripted HTTP answer."""

    status: int = 200
    body: bytes = b""
    frames: list[bytes] | None = None
    """When set, the body is streamed as these separate chunks (SSE)."""
    headers: dict[str, str] = field(default_factory=dict[str, str])
    delay: float = 0.0
    """Seconds to wait before answering (to provoke client timeouts)."""


@dataclass
class Received:
    """One request as it arrived on the wire."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class ReplayServer:
    """Serve queued :class:`Reply` objects in order and record every request."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.received: list[Received] = []
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        config = uvicorn.Config(
            self.app, lifespan="off", ws="none", interface="asgi3", log_level="warning", access_log=False
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True)

    def reset(self) -> None:
        """Forget queued replies and received requests (between tests sharing one server)."""
        self.replies.clear()
        self.received.clear()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def json(
        self, body: bytes | str | dict[str, Any], *, status: int = 200, headers: dict[str, str] | None = None
    ) -> None:
        """Queue a JSON answer (a fixture's bytes or a dict)."""
        raw = body if isinstance(body, bytes) else (body if isinstance(body, str) else json.dumps(body)).encode()
        self.replies.append(
            Reply(status=status, body=raw, headers={"content-type": "application/json", **(headers or {})})
        )

    def sse(self, raw: bytes, *, headers: dict[str, str] | None = None) -> None:
        """Queue a streamed answer: the recorded SSE body, sent frame by frame."""
        self.replies.append(
            Reply(frames=sse_frames(raw), headers={"content-type": "text/event-stream", **(headers or {})})
        )

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert scope["type"] == "http"
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.received.append(Received(scope["method"], scope["path"], scope["query_string"].decode(), headers, body))
        reply = self.replies.popleft() if self.replies else Reply(status=500, body=b'{"error": "no reply queued"}')
        if reply.delay:
            await asyncio.sleep(reply.delay)
        raw_headers = [(k.encode(), v.encode()) for k, v in reply.headers.items()]
        await send({"type": "http.response.start", "status": reply.status, "headers": raw_headers})
        if reply.frames is None:
            await send({"type": "http.response.body", "body": reply.body})
            return
        for frame in reply.frames:
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    def __enter__(self) -> Self:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("replay server did not start")
            time.sleep(0.005)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()
