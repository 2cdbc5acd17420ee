"""What local agents and remote clients share.

``run``, ``wait`` and the snapshot helpers, built on ``connect`` and ``get_snapshot``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from ._json import check_message, type_name
from .agent_io import AgentInput, AgentOutput, StreamChunk
from .claims import is_answerable
from .errors import DeadlineExceededError, InvalidArgumentError, SnapshotNotFoundError
from .interrupts import Resume, check_resume_shape
from .messages import Message
from .parts import ToolRequestPart
from .sessions import SessionState, Snapshot, check_state

__all__ = ["SETTLED", "AgentAPI", "InputLike", "as_input"]

InputLike = str | Message | AgentInput | None
SETTLED = frozenset({"completed", "failed", "aborted", "expired"})
"""Statuses after which a snapshot no longer changes by itself."""


def as_input(value: InputLike | object, *, resume: Resume | None = None, detach: bool = False) -> AgentInput:
    """Normalise what callers pass to ``send``/``run`` into a checked :class:`AgentInput`.

    This is the input edge: a value of the wrong type (``run(12345)``, a dict instead of a
    :class:`Resume`, a part of the wrong kind) or one holding something that is not JSON
    raises :class:`~interlock.errors.InvalidArgumentError` here, before anything runs.
    """
    if isinstance(value, AgentInput):
        if resume is not None or detach:
            value = AgentInput(message=value.message, resume=resume or value.resume, detach=detach or value.detach)
    elif value is None or isinstance(value, (str, Message)):
        message = Message.user(value) if isinstance(value, str) else value
        value = AgentInput(message=message, resume=resume, detach=detach)
    else:
        raise InvalidArgumentError(f"an agent input is a string, a Message or an AgentInput, not {type_name(value)}")
    if value.message is not None:
        check_message(value.message, "message")
    if value.resume is not None:
        check_resume_shape(value.resume)
    flag: Any = value.detach
    if not isinstance(flag, bool):
        raise InvalidArgumentError("'detach' must be a boolean")
    return value


class _Connection(Protocol):
    async def send(self, value: InputLike = None, *, resume: Resume | None = None, detach: bool = False) -> None: ...
    async def close(self) -> None: ...
    def __aiter__(self) -> Any: ...
    async def output(self) -> AgentOutput: ...


class AgentAPI:
    """The interface of an agent, local or remote; subclasses provide ``connect`` and ``get_snapshot``."""

    wait_interval: float = 0.1

    def connect(
        self,
        *,
        snapshot_id: str | None = None,
        session_id: str | None = None,
        state: SessionState | None = None,
        context: dict[str, Any] | None = None,
    ) -> Any:
        raise NotImplementedError

    async def get_snapshot(
        self, snapshot_id: str | None = None, *, session_id: str | None = None, context: dict[str, Any] | None = None
    ) -> Snapshot | None:
        raise NotImplementedError

    async def run(
        self,
        input: InputLike = None,
        *,
        resume: Resume | None = None,
        detach: bool = False,
        snapshot_id: str | None = None,
        session_id: str | None = None,
        state: SessionState | None = None,
        context: dict[str, Any] | None = None,
        on_chunk: Callable[[StreamChunk], Awaitable[None] | None] | None = None,
    ) -> AgentOutput:
        """Run one input (a message, a resume, or both) and return the output."""
        if input is None and resume is None and not detach:
            raise InvalidArgumentError("agent input message or resume is required")
        as_input(input, resume=resume, detach=detach)  # refuse bad input before connecting
        if state is not None:
            check_state(state)
        conn: _Connection = self.connect(snapshot_id=snapshot_id, session_id=session_id, state=state, context=context)
        await conn.send(input, resume=resume, detach=detach)
        await conn.close()
        if on_chunk is not None:
            async for chunk in conn:
                result = on_chunk(chunk)
                if inspect.isawaitable(result):
                    await result
        return await conn.output()

    async def get_latest_snapshot(self, session_id: str, *, context: dict[str, Any] | None = None) -> Snapshot | None:
        """The session's latest (leaf) snapshot."""
        return await self.get_snapshot(session_id=session_id, context=context)

    async def pending_interrupts(
        self, snapshot_id: str | None = None, *, session_id: str | None = None, context: dict[str, Any] | None = None
    ) -> list[ToolRequestPart]:
        """The interrupts a stored snapshot waits on (recover them in one call, from any process)."""
        snap = await self.get_snapshot(snapshot_id, session_id=session_id, context=context)
        return [] if snap is None or not is_answerable(snap) else list(snap.interrupts)

    async def wait(
        self,
        snapshot_id: str,
        *,
        timeout: float | None = None,
        interval: float | None = None,
        context: dict[str, Any] | None = None,
    ) -> Snapshot:
        """Poll a snapshot until it is completed, failed, aborted or expired."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            snap = await self.get_snapshot(snapshot_id, context=context)
            if snap is None:
                raise SnapshotNotFoundError(f"Snapshot {snapshot_id} not found")
            if snap.status in SETTLED:
                return snap
            if deadline is not None and loop.time() >= deadline:
                raise DeadlineExceededError(f"snapshot {snapshot_id} is still {snap.status} after {timeout} s")
            await asyncio.sleep(self.wait_interval if interval is None else interval)
