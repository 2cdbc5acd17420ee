"""Claims: how exactly one resume of an interrupted snapshot runs its tools.

A resume first *claims* the interrupted snapshot in one atomic store write. Of several
racing resumes (in any process) one wins; the others get :class:`ClaimConflictError`
(ABORTED) naming the winner. The winner keeps its claim fresh while its turn runs. A turn
that fails or is aborted releases its claim, so the interrupt can be answered again; the
claim of a resumer that died expires after ``ttl`` seconds and may be taken over (the
takeover is recorded as ``metadata.reclaimedFrom``).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from .errors import ClaimConflictError, SnapshotNotFoundError
from .sessions import Snapshot, utcnow
from .stores import SessionStore

__all__ = ["Claims"]


class Claims:
    """Claims on interrupted snapshots in one store, for one tenant."""

    def __init__(self, store: SessionStore, tenant: str | None, *, ttl: float) -> None:
        self.store = store
        self.tenant = tenant
        self.ttl = ttl

    async def take(self, parent_id: str, turn_id: str) -> str | None:
        """Claim ``parent_id`` for ``turn_id``; returns the dead resumer it was taken over from, if any.

        Raises:
            ClaimConflictError: another resume holds a fresh claim, or already finished.
        """
        steal: str | None = None
        for _ in range(2):
            take = _Take(parent_id=parent_id, turn_id=turn_id, ttl=self.ttl, steal=steal)
            if await self.store.save(parent_id, take, tenant=self.tenant) is not None:
                return steal
            holder = take.expired
            done = None if holder is None else await self.store.load(holder, tenant=self.tenant)
            if done is not None and done.status not in ("failed", "aborted"):
                raise _conflict(parent_id, holder)
            steal = holder
        raise _conflict(parent_id, steal)

    async def keep_fresh(self, parent_id: str, turn_id: str) -> None:
        """Refresh the claim every ``ttl / 3`` seconds until cancelled."""
        while True:
            await asyncio.sleep(self.ttl / 3)

            def refresh(cur: Snapshot | None) -> Snapshot | None:
                return cur.evolve(claimed_at=utcnow()) if cur is not None and cur.claimed_by == turn_id else None

            with contextlib.suppress(Exception):
                await self.store.save(parent_id, refresh, tenant=self.tenant)

    async def release(self, parent_id: str, turn_id: str | None) -> None:
        """Give the interrupt back (the claiming turn failed or was aborted)."""

        def release(cur: Snapshot | None) -> Snapshot | None:
            if cur is None or cur.claimed_by != turn_id:
                return None
            return cur.evolve(claimed_by=None, claimed_at=None)

        with contextlib.suppress(Exception):
            await self.store.save(parent_id, release, tenant=self.tenant)


@dataclass(kw_only=True)
class _Take:
    """The claim updater: take an unclaimed (or expired, or ``steal``-able) interrupted snapshot."""

    parent_id: str
    turn_id: str
    ttl: float
    steal: str | None
    expired: str | None = None

    def __call__(self, cur: Snapshot | None) -> Snapshot | None:
        if cur is None:
            raise SnapshotNotFoundError(f"Snapshot {self.parent_id} not found")
        now = utcnow()
        holder = cur.claimed_by
        if holder and holder not in (self.turn_id, self.steal):
            if cur.claimed_at is not None and (now - cur.claimed_at).total_seconds() < self.ttl:
                raise _conflict(self.parent_id, holder)
            self.expired = holder
            return None
        meta = dict(cur.metadata or {})
        if self.steal:
            meta["reclaimedFrom"] = self.steal
        return cur.evolve(claimed_by=self.turn_id, claimed_at=now, metadata=meta)


def _conflict(parent_id: str, holder: str | None) -> ClaimConflictError:
    return ClaimConflictError(
        f"Snapshot {parent_id} was already resumed by turn {holder}; each interrupt is answered once. "
        f"Load snapshot {holder} to continue from there.",
        winner=holder,
    )
