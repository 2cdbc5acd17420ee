"""The SQLite store's worker thread: runs blocking calls one at a time, in order, off the event loop.

A lighter hop than ``loop.run_in_executor``: no ``concurrent.futures.Future`` (with its
condition variable) chained to an asyncio one, just the caller's future, resolved on its
loop. Like an executor's, a call whose caller stopped waiting before it started is skipped.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

_R = TypeVar("_R")

_Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[..., Any], tuple[Any, ...]]


class Worker:
    """One daemon thread, started on first use, stopped by :meth:`stop`."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._lock = threading.Lock()

    async def call(self, fn: Callable[..., _R], *args: Any) -> _R:
        """``fn(*args)`` on the worker thread; its result or exception."""
        if not self._thread.is_alive():
            self._start()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[_R] = loop.create_future()
        self._jobs.put((loop, future, fn, args))
        return await future

    def stop(self) -> None:
        """Finish the queued calls, then end the thread."""
        with self._lock:
            if self._thread.is_alive():
                self._jobs.put(None)
                self._thread.join()

    def _start(self) -> None:
        with self._lock:
            if not self._thread.is_alive() and self._thread.ident is None:
                self._thread.start()

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            loop, future, fn, args = job
            if future.cancelled():  # its caller was cancelled before it started: never run it
                continue
            try:
                result = fn(*args)
            except BaseException as exc:  # handed to the caller, whatever it is
                _hand(loop, _fail, future, exc)
            else:
                _hand(loop, _succeed, future, result)


def _hand(loop: asyncio.AbstractEventLoop, fn: Callable[..., None], *args: Any) -> None:
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:  # the caller's loop is closed: nobody waits for the result
        pass


def _succeed(future: asyncio.Future[Any], result: object) -> None:
    if not future.done():
        future.set_result(result)


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)
