"""What a local and a remote connection share: inputs, the input side's end, the chunk stream and the output.

A connection is fed from one side: its inputs go to an invocation in this process
(:class:`~interlock.agents.AgentConnection`) or out as HTTP requests
(:class:`~interlock.http.RemoteConnection`); either way its chunks arrive on one queue
that :data:`END` closes, and its output is one future.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import AsyncIterator
from typing import Literal, Self, TypeAlias

from ..errors import UsageError
from ..interrupts._plan import Resume
from .io import AgentInput, AgentOutput, InputLike, StreamChunk, as_input


class _End(enum.Enum):
    END = "end"


END = _End.END
"""Marks the end of an input or chunk queue."""
Ended: TypeAlias = Literal[_End.END]
"""The type of :data:`END` (``queue: asyncio.Queue[StreamChunk | Ended]``)."""


class BaseConnection:
    """A live invocation: send inputs, iterate stream chunks, then take the output.

    Subclasses say where an input goes (:meth:`_put`), what closing the input side does
    (:meth:`_end_inputs`) and how to stop (``cancel``); they put the chunks on ``_chunks``
    (then :data:`END`) and resolve ``_output``.
    """

    def __init__(self, chunks: asyncio.Queue[StreamChunk | Ended], output: asyncio.Future[AgentOutput]) -> None:
        self._chunks = chunks
        self._output = output
        self._closed = False

    async def send(self, value: InputLike = None, *, resume: Resume | None = None, detach: bool = False) -> None:
        """Queue one input: a message (text or :class:`~interlock.Message`), a resume, or both."""
        if self._closed:
            raise UsageError("this connection is closed; open a new one with agent.connect()")
        self._put(as_input(value, resume=resume, detach=detach))

    async def resume(self, resume: Resume) -> None:
        """Queue a resume: answers to the paused turn's interrupts."""
        await self.send(None, resume=resume)

    async def detach(self) -> None:
        """Send the rest of the invocation to the background; the output becomes a pending snapshot."""
        await self.send(AgentInput(detach=True))

    async def close(self) -> None:
        """End the input side; the queued inputs still run."""
        if not self._closed:
            self._closed = True
            self._end_inputs()

    def __aiter__(self) -> AsyncIterator[StreamChunk]:
        return self._stream()

    async def _stream(self) -> AsyncIterator[StreamChunk]:
        while True:
            chunk = await self._chunks.get()
            if chunk is END:
                self._chunks.put_nowait(END)  # for the next iterator
                return
            yield chunk

    async def output(self) -> AgentOutput:
        """The invocation's output (closes the input side first); raises the typed error of a refused one."""
        await self.close()
        return await asyncio.shield(self._output)

    def cancel(self) -> None:
        """Stop the invocation now."""
        raise NotImplementedError

    def _put(self, input: AgentInput) -> None:
        raise NotImplementedError

    def _end_inputs(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
