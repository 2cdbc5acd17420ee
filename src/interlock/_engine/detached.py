"""The detached run: the pending row a detach writes, its heartbeat, the abort watch, and its final write.

A detach answers the caller at once with the pending row's id; the invocation runs on in the
background, keeps the row's heartbeat fresh, stops when the row is aborted, and at its end
writes its outcome into the row (fenced by the claim of a resumed turn, which it then releases).

On a worker (:func:`interlock._engine.invocation.run_handed_off`) the run also holds ``lease``, the
worker's claim on the pending row itself: every write of the row is fenced by it, so an
attempt whose lease was taken over writes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..interrupts._plan import ResumePlan
from ..interrupts._tokens import mint_tokens
from ..records._sessions import ErrorInfo, SessionState, Snapshot, utcnow
from ..records.snapshots import NoChange, fail_pending, finalize, heartbeat, put_row
from ..stores import Updater
from .commit import ClaimHold, TurnWriter, error_info


@dataclass(kw_only=True)
class DetachedRun:
    """One detached invocation's pending row ``snapshot_id``, and the turn its final write commits."""

    writer: TurnWriter
    snapshot_id: str
    session_id: str
    hold: ClaimHold | None = None
    parent: Snapshot | None = None
    plan: ResumePlan | None = None
    lease: ClaimHold | None = None
    """A worker's lease on the pending row: fences every write of it."""

    async def start(self, parent_id: str | None, on_abort: Callable[[], None]) -> list[asyncio.Task[None]]:
        """Write the pending row; return the tasks that keep it fresh and watch for its abort."""
        await self.write_pending(parent_id, {})
        return self.keep_alive(on_abort)

    async def write_pending(self, parent_id: str | None, extra: dict[str, Any]) -> None:
        """Write the pending row (``extra``: more metadata)."""
        pending = self.pending_row(parent_id, extra)
        await self.writer.store.save(self.snapshot_id, put_row(pending), tenant=self.writer.tenant)

    def pending_row(self, parent_id: str | None, extra: dict[str, Any]) -> Snapshot:
        """The pending row (``extra``: more metadata, e.g. what a worker needs: :mod:`interlock._engine.handoff`)."""
        now = utcnow()
        return Snapshot(
            snapshot_id=self.snapshot_id,
            session_id=self.session_id,
            parent_id=parent_id,
            created_at=now,
            heartbeat_at=now,
            status="pending",
            metadata={"agent": self.writer.agent.name, **extra},
        )

    def keep_alive(self, on_abort: Callable[[], None]) -> list[asyncio.Task[None]]:
        """The tasks that keep the pending row's heartbeat fresh and watch for its abort."""
        return [asyncio.ensure_future(self._heartbeat()), asyncio.ensure_future(self._watch_abort(on_abort))]

    def hand_over(self, hold: ClaimHold | None, parent: Snapshot | None, plan: ResumePlan | None) -> None:
        """The turn that ran detached ended: its claim (if it resumed) is committed by :meth:`finalize`."""
        self.hold, self.parent, self.plan = hold, parent, plan

    async def _heartbeat(self) -> None:
        writer = self.writer
        while True:
            await asyncio.sleep(writer.agent.host.heartbeat_interval)
            with contextlib.suppress(Exception):
                await writer.store.save(self.snapshot_id, heartbeat(), tenant=writer.tenant)

    async def _watch_abort(self, on_abort: Callable[[], None]) -> None:
        async for status in self.writer.store.watch(self.snapshot_id, tenant=self.writer.tenant):
            if status == "aborted":
                on_abort()
                return

    async def finalize(
        self,
        state: SessionState,
        error: ErrorInfo | None,
        finish: str,
        traced: dict[str, Any],
        aborted: asyncio.Event,
    ) -> None:
        """Write the run's outcome into its pending row, fenced by the claim of a resumed turn."""
        writer, snapshot_id = self.writer, self.snapshot_id
        hold, self.hold = self.hold, None
        if finish == "interrupted":
            state.messages = mint_tokens(
                writer.agent, state.messages, session_id=self.session_id, snapshot_id=snapshot_id
            )
        meta = writer.metadata(self.plan, {})
        events = (
            []
            if error
            else writer.events(self.session_id, snapshot_id, self.parent, finish, state.messages, self.plan, meta)
        )
        outcome = finalize(state=state, error=error, finish=finish, traced=traced)
        writes: list[tuple[str, Updater]] = [(snapshot_id, self._fenced(outcome))]
        try:
            if aborted.is_set():
                return
            if hold is None:
                await writer.store.save_all(writes, tenant=writer.tenant, events=events)
            else:
                await hold.commit(writes, events=events)
            if self.lease is not None:
                self.lease.settled()
        except NoChange:  # the row was aborted meanwhile: nothing may commit
            pass
        except Exception as exc:  # e.g. the claim lapsed: the row must not stay pending
            await self.fail(error_info(exc))
        finally:
            if hold is not None:
                await hold.release()
            await self.release()

    async def fail(self, error: ErrorInfo) -> None:
        """Mark the pending row failed (on a worker, fenced by its lease: never over another attempt's run)."""
        with contextlib.suppress(Exception):
            await self.writer.store.save(self.snapshot_id, self._fenced(fail_pending(error)), tenant=self.writer.tenant)
            if self.lease is not None:
                self.lease.settled()

    async def release(self) -> None:
        """Give a worker's lease back (idempotent; nothing to do after its fenced write committed)."""
        if self.lease is not None:
            await self.lease.release()

    def _fenced(self, update: Updater) -> Updater:
        return update if self.lease is None else self.lease.own_updater(update)
