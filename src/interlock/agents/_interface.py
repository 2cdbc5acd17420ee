"""What local agents and remote clients share.

``run``, ``chat``, ``wait`` and the snapshot helpers, built on ``connect`` and ``get_snapshot``.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from .._engine.io import AgentOutput, Connection, InputLike, OnChunk, as_input, send_checked
from ..errors import DeadlineExceededError, InvalidArgumentError
from ..interrupts._plan import Resume
from ..parts import ToolRequestPart
from ..records._sessions import SessionState, Snapshot, check_state
from ..records.snapshots import is_answerable
from ._chat import Chat

SETTLED = frozenset({"completed", "failed", "aborted", "expired"})
"""Statuses after which a snapshot no longer changes by itself."""


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
    ) -> Connection:
        raise NotImplementedError

    async def get_snapshot(
        self, snapshot_id: str | None = None, *, session_id: str | None = None, context: dict[str, Any] | None = None
    ) -> Snapshot:
        """A stored snapshot by id, or a session's latest; raises :class:`SnapshotNotFoundError` (NOT_FOUND)."""
        raise NotImplementedError

    async def aclose(self) -> None:
        """Release what the agent holds open (a remote agent's HTTP client); local agents hold nothing."""

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
        on_chunk: OnChunk | None = None,
        raise_on_error: bool = True,
    ) -> AgentOutput:
        """Run one input (a message, a resume, or both) and return the output.

        A failed invocation raises :class:`~interlock._engine.io.AgentError` (its ``output``
        attached: status, message, the last good snapshot or state); with
        ``raise_on_error=False`` it is returned, ``finish_reason`` ``failed``.
        """
        if input is None and resume is None and not detach:
            raise InvalidArgumentError("agent input message or resume is required")
        checked = as_input(input, resume=resume, detach=detach)  # refuse bad input before connecting, once
        if state is not None:
            check_state(state)
        conn = self.connect(snapshot_id=snapshot_id, session_id=session_id, state=state, context=context)
        await send_checked(conn, checked)
        await conn.close()
        if on_chunk is not None:
            async for chunk in conn:
                result = on_chunk(chunk)
                if inspect.isawaitable(result):
                    await result
        output = await conn.output()
        return output.raise_for_error() if raise_on_error else output

    def run_sync(
        self,
        input: InputLike = None,
        *,
        resume: Resume | None = None,
        snapshot_id: str | None = None,
        session_id: str | None = None,
        state: SessionState | None = None,
        context: dict[str, Any] | None = None,
        raise_on_error: bool = True,
    ) -> AgentOutput:
        """:meth:`run` for code without an event loop (then :meth:`aclose`)."""

        async def once() -> AgentOutput:
            try:
                return await self.run(
                    input,
                    resume=resume,
                    snapshot_id=snapshot_id,
                    session_id=session_id,
                    state=state,
                    context=context,
                    raise_on_error=raise_on_error,
                )
            finally:
                await self.aclose()

        return asyncio.run(once())

    def chat(
        self,
        *,
        snapshot_id: str | None = None,
        session_id: str | None = None,
        state: SessionState | None = None,
        context: dict[str, Any] | None = None,
        raise_on_error: bool = True,
    ) -> Chat:
        """A conversation that tracks the snapshot (server-managed) or the state (client-managed) for you."""
        return Chat(
            self,
            snapshot_id=snapshot_id,
            session_id=session_id,
            state=state,
            context=context,
            raise_on_error=raise_on_error,
        )

    async def load_chat(
        self,
        *,
        snapshot_id: str | None = None,
        session_id: str | None = None,
        context: dict[str, Any] | None = None,
        raise_on_error: bool = True,
    ) -> Chat:
        """A conversation continuing a stored snapshot (or a session's latest); raises NOT_FOUND when there is none.

        Its ``interrupts`` are those the snapshot waits on, so a paused turn can be answered at once.
        """
        snap = await self.get_snapshot(snapshot_id, session_id=session_id, context=context)
        return Chat.loaded(self, snap, context=context, raise_on_error=raise_on_error)

    async def get_latest_snapshot(self, session_id: str, *, context: dict[str, Any] | None = None) -> Snapshot:
        """The session's latest (leaf) snapshot; raises NOT_FOUND for an unknown session."""
        return await self.get_snapshot(session_id=session_id, context=context)

    async def pending_interrupts(
        self, snapshot_id: str | None = None, *, session_id: str | None = None, context: dict[str, Any] | None = None
    ) -> list[ToolRequestPart]:
        """The interrupts a stored snapshot waits on (recover them in one call, from any process).

        ``[]`` when it waits on none (its turn did not pause, or the pause was answered);
        raises :class:`SnapshotNotFoundError` (NOT_FOUND) when there is no such snapshot.
        """
        snap = await self.get_snapshot(snapshot_id, session_id=session_id, context=context)
        return list(snap.interrupts) if is_answerable(snap) else []

    async def wait(
        self,
        snapshot_id: str,
        *,
        timeout: float | None = None,
        interval: float | None = None,
        context: dict[str, Any] | None = None,
    ) -> Snapshot:
        """Wait until a snapshot is completed, failed, aborted or expired (see :meth:`changed`)."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            snap = await self.get_snapshot(snapshot_id, context=context)
            if snap.status in SETTLED:
                return snap
            left = None if deadline is None else deadline - loop.time()
            if left is not None and left <= 0:
                raise DeadlineExceededError(f"snapshot {snapshot_id} is still {snap.status} after {timeout} s")
            await self.changed(snap, timeout=left, interval=interval, context=context)

    async def changed(
        self,
        snap: Snapshot,
        *,
        timeout: float | None = None,
        interval: float | None = None,
        context: dict[str, Any] | None = None,
    ) -> None:
        """Return once ``snap``'s status may have changed, or after ``timeout`` seconds.

        Here: after ``interval`` (default :attr:`wait_interval`), a poll. A local agent
        overrides it to wake on its store's :meth:`~interlock.stores.SnapshotStore.watch`.
        """
        pause = self.wait_interval if interval is None else interval
        await asyncio.sleep(pause if timeout is None else min(pause, timeout))
