"""A real webhook receiver for the tests: an HTTP server on 127.0.0.1 in a thread, recording every request."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Generator, Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float


@dataclass
class Receiver:
    """Answers with the queued statuses (then 200); ``hold`` makes it wait before answering (bounded)."""

    statuses: deque[int] = field(default_factory=deque[int])
    requests: list[Received] = field(default_factory=list[Received])
    hold: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    url: str = ""
    delay: float = 0.0
    """Seconds to wait before each answer."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def received(self, timeout: float, count: int = 1) -> list[Received]:
        """Wait (at most ``timeout`` s) until ``count`` requests arrived; returns them all."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.requests) >= count:
                    return list(self.requests)
            time.sleep(0.02)
        with self.lock:
            return list(self.requests)


@contextmanager
def receiver(statuses: Iterable[int] = ()) -> Generator[Receiver]:
    """Run a :class:`Receiver` on a free port of 127.0.0.1 for the block."""
    state = Receiver(statuses=deque(statuses))

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            with state.lock:
                state.requests.append(Received(self.path, dict(self.headers.items()), body, time.monotonic()))
                status = state.statuses.popleft() if state.statuses else 200
            if state.hold.is_set():
                state.release.wait(30)
            time.sleep(state.delay)
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}/"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
