"""Claims: how exactly one resume of an interrupted snapshot runs its tools and commits.

A resume first *claims* the interrupted snapshot in one atomic store write. Of several
racing resumes (in any process) one wins; the others get :class:`ClaimConflictError`
(ABORTED) naming the winner. A claim is a lease: it carries its holder (the resuming
turn's snapshot id, which is unique per attempt and so serves as the fencing token) and
an expiry, which the holder extends every ``ttl / 3`` seconds while its turn runs.

The holder's commit is *fenced*: the turn's snapshot is written in the same transaction
that checks the claim is still held by that holder and unexpired, and marks it answered.
A holder whose lease lapsed (a blocked event loop, a stopped process) or was taken over
cannot commit. Every exit path that does not commit gives the claim back. A lease that
lapsed may be taken over whatever the holder's own row says; the takeover is recorded as
``metadata.reclaimedFrom`` and a dead detached holder's pending row is marked failed.

:func:`claim_state` is the one rule for "is this interrupt taken": the runtime, the
inbox and ``pending_interrupts`` all use it, locally and over HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal, TypeAlias

from ._json_object import is_array
from .errors import ClaimConflictError, PermissionDeniedError, SnapshotNotFoundError
from .metadata import CONSUMED_TOKENS, RECLAIMED_FROM
from .outbox import OutboxEvent
from .sessions import ErrorInfo, Snapshot, fail_pending, utcnow
from .stores import JournalUpdater, SnapshotStore, Updater
from .telemetry import hooks

__all__ = ["ClaimHold", "ClaimState", "Claims", "claim_state", "consumed_tokens", "is_answerable", "refuse_spent"]

ClaimState: TypeAlias = Literal["free", "held", "answered", "lapsed"]
"""``free``: nobody claimed it; ``held``: a resume is running; ``answered``: a resume committed;
``lapsed``: a resume claimed it and stopped refreshing (it may be taken over)."""


def claim_state(snap: Snapshot, now: datetime | None = None) -> ClaimState:
    """The state of the claim on ``snap`` (see :data:`ClaimState`)."""
    if not snap.claimed_by:
        return "free"
    if snap.claim_expires_at is None:
        return "answered"
    return "held" if (now or utcnow()) < snap.claim_expires_at else "lapsed"


def is_answerable(snap: Snapshot, now: datetime | None = None) -> bool:
    """True when a resume of ``snap`` may claim it now (nobody holds it, or the holder's lease lapsed)."""
    return claim_state(snap, now) in ("free", "lapsed")


class Claims:
    """Claims on interrupted snapshots in one store, for one tenant."""

    def __init__(self, store: SnapshotStore, tenant: str | None, *, ttl: float) -> None:
        self.store = store
        self.tenant = tenant
        self.ttl = ttl

    async def take(
        self,
        parent_id: str,
        turn_id: str,
        *,
        nonces: Sequence[str] = (),
        journal: Sequence[tuple[str, JournalUpdater]] = (),
    ) -> ClaimHold:
        """Claim ``parent_id`` for ``turn_id`` and keep the lease fresh until the hold ends.

        ``journal`` is written in the claim's transaction (the intents of the calls the
        resume restarts, :meth:`interlock.effects.Effects.prepare`): only if the claim is taken.

        ``nonces`` are the resume tokens' (:mod:`interlock.tokens`): they are spent by the
        hold's fenced commit, in the same transaction (a hold released without committing
        leaves them unspent). A token spent on ``parent_id`` was spent by the answer that
        won, so its resume is refused like any other second answer: ABORTED naming the winner.

        Raises:
            ClaimConflictError: another resume holds the claim, or already answered (a spent
                token's resume included).
            PermissionDeniedError: a token was spent (``replayed``) on a snapshot nobody answered.
            SnapshotNotFoundError: there is no such snapshot.
        """
        steal: str | None = None
        for _ in range(3):
            take = _Take(turn_id=turn_id, ttl=self.ttl, steal=steal, nonces=tuple(nonces))
            writes: list[tuple[str, Updater]] = [(parent_id, take)]
            if steal is not None:
                writes.append((steal, _fail_taken_over(turn_id)))
            entries = [(key, _if_taken(take, update)) for key, update in journal]
            written = await self.store.save_all(writes, tenant=self.tenant, journal=entries)
            if written[0] is not None:
                hold = ClaimHold(
                    claims=self, parent_id=parent_id, turn_id=turn_id, reclaimed_from=steal, nonces=tuple(nonces)
                )
                hold.start()
                hooks.claim_taken(parent_id, turn_id, steal, self.ttl)
                return hold
            assert take.lapsed is not None
            holder = await self.store.load(take.lapsed, tenant=self.tenant)
            if holder is not None and holder.status == "completed":  # it did commit (a row from an older layout)
                raise conflict(parent_id, take.lapsed, answered=True)
            steal = take.lapsed
        raise conflict(parent_id, steal, answered=False)


@dataclass(kw_only=True, eq=False)
class ClaimHold:
    """A claim held by one turn: refreshed until it is committed or released (idempotent, every exit path)."""

    claims: Claims
    parent_id: str
    turn_id: str
    reclaimed_from: str | None = None
    nonces: tuple[str, ...] = ()
    """The resume tokens' nonces this hold's commit spends (``metadata.consumedTokens``)."""
    lost: str | None = None
    """Why the lease was lost while the turn ran (then :meth:`commit_updater` refuses)."""
    done: bool = False
    _refresher: asyncio.Task[None] | None = field(default=None, repr=False)

    def start(self) -> None:
        self._refresher = asyncio.ensure_future(self._keep_fresh())

    async def _keep_fresh(self) -> None:
        claims = self.claims
        while True:
            await asyncio.sleep(claims.ttl / 3)
            try:
                written = await claims.store.save(self.parent_id, self._refresh, tenant=claims.tenant)
            except ClaimConflictError as exc:
                self.lost = exc.message
                hooks.claim_lost(self.parent_id, self.turn_id, exc.message)
                return
            except Exception:  # the store is unreachable: the lease runs out, and the commit will refuse
                continue
            if written is None:
                return

    def _refresh(self, cur: Snapshot | None) -> Snapshot | None:
        if cur is None or cur.claimed_by != self.turn_id or claim_state(cur) != "held":
            raise conflict(self.parent_id, None if cur is None else cur.claimed_by, answered=False, lapsed=True)
        return cur.evolve(claim_expires_at=utcnow() + timedelta(seconds=self.claims.ttl))

    def commit_updater(self) -> Updater:
        """The updater that fences a commit: the claim must still be held by this turn; it becomes answered.

        It spends the hold's token nonces in the same write. Write it with the turn's
        snapshot in one :meth:`~interlock.stores.SnapshotStore.save_all`.
        """

        def confirm(cur: Snapshot | None) -> Snapshot | None:
            if cur is None:
                raise SnapshotNotFoundError(f"Snapshot {self.parent_id} was deleted while turn {self.turn_id} ran")
            if cur.claimed_by != self.turn_id or claim_state(cur) != "held":
                raise conflict(self.parent_id, cur.claimed_by, answered=False, lapsed=True)
            if not self.nonces:
                return cur.evolve(claim_expires_at=None)
            meta = {**(cur.metadata or {}), CONSUMED_TOKENS: [*consumed_tokens(cur), *self.nonces]}
            return cur.evolve(claim_expires_at=None, metadata=meta)

        return confirm

    def own_updater(self, update: Updater) -> Updater:
        """For a claim on the very row the holder writes (a worker's lease on a pending snapshot).

        The fence of :meth:`commit_updater`, then ``update``; the written row's claim is cleared
        (a finished turn's row is not held by anyone). Write it with ``store.save_all``, then
        call :meth:`settled`.
        """
        confirm = self.commit_updater()

        def fenced(cur: Snapshot | None) -> Snapshot | None:
            new = update(confirm(cur))
            return None if new is None else new.evolve(claimed_by=None, claim_expires_at=None)

        return fenced

    def settled(self) -> None:
        """The holder's :meth:`own_updater` write committed: stop refreshing; nothing is left to release."""
        self._stop()
        self.done = True

    async def commit(
        self,
        writes: Sequence[tuple[str, Updater]],
        *,
        journal: Sequence[tuple[str, JournalUpdater]] = (),
        events: Sequence[OutboxEvent] = (),
    ) -> list[Snapshot | None]:
        """Write ``writes`` (``journal`` entries, outbox ``events``) fenced by this claim, in one transaction.

        The claim is answered after it.

        Raises:
            ClaimConflictError: the lease lapsed or was taken over; nothing was written.
        """
        self._stop()
        if self.lost is not None:
            raise ClaimConflictError(self.lost)
        claims = self.claims
        try:
            written = await claims.store.save_all(
                [(self.parent_id, self.commit_updater()), *writes], tenant=claims.tenant, journal=journal, events=events
            )
        except ClaimConflictError as exc:
            hooks.claim_lost(self.parent_id, self.turn_id, exc.message)
            raise
        self.done = True
        return written[1:]

    async def release(self) -> None:
        """Give the interrupt back, unless this hold committed (idempotent; errors are swallowed)."""
        self._stop()
        if self.done:
            return
        self.done = True
        with contextlib.suppress(Exception):
            await self.claims.store.save(self.parent_id, release_by(self.turn_id), tenant=self.claims.tenant)

    def _stop(self) -> None:
        if self._refresher is not None:
            self._refresher.cancel()
            self._refresher = None


def release_by(holder: str) -> Updater:
    """The updater that drops ``holder``'s unanswered claim (and leaves any other row alone)."""

    def release(cur: Snapshot | None) -> Snapshot | None:
        if cur is None or cur.claimed_by != holder or cur.claim_expires_at is None:
            return None
        return cur.evolve(claimed_by=None, claim_expires_at=None)

    return release


@dataclass(kw_only=True)
class _Take:
    """The claim updater: take a free (or lapsed, when ``steal`` names its holder) interrupted snapshot."""

    turn_id: str
    ttl: float
    steal: str | None
    nonces: tuple[str, ...] = ()
    lapsed: str | None = None

    def __call__(self, cur: Snapshot | None) -> Snapshot | None:
        if cur is None:
            raise SnapshotNotFoundError("Snapshot not found")
        now = utcnow()
        state = claim_state(cur, now)
        if state in ("held", "answered") and cur.claimed_by != self.turn_id:  # a spent token too: who answered
            raise conflict(cur.snapshot_id, cur.claimed_by, answered=state == "answered")
        refuse_spent(cur, self.nonces)  # spent, yet nobody answered
        if state == "lapsed" and cur.claimed_by not in (self.steal, self.turn_id):  # its own lapsed claim: retaken
            self.lapsed = cur.claimed_by
            return None
        meta = dict(cur.metadata or {})
        if self.steal:
            meta[RECLAIMED_FROM] = self.steal
        return cur.evolve(claimed_by=self.turn_id, claim_expires_at=now + timedelta(seconds=self.ttl), metadata=meta)


def _if_taken(take: _Take, update: JournalUpdater) -> JournalUpdater:
    """``update``, applied only when ``take`` took the claim (its row is written before journal entries)."""
    return lambda cur: update(cur) if take.lapsed is None else None


def refuse_spent(snap: Snapshot, nonces: Sequence[str]) -> None:
    """The one rule of single use: raise PERMISSION_DENIED (``replayed``) if one of ``nonces`` was spent on ``snap``."""
    if nonces and not set(nonces).isdisjoint(consumed_tokens(snap)):
        raise PermissionDeniedError(
            f"a resume token for snapshot {snap.snapshot_id} was already used by a committed answer (replayed); "
            "each token answers its interrupt once",
            details={"reason": "replayed"},
        )


def consumed_tokens(snap: Snapshot) -> list[str]:
    """The resume-token nonces spent on ``snap`` by its committed answer (``metadata.consumedTokens``)."""
    spent = (snap.metadata or {}).get(CONSUMED_TOKENS)
    return [n for n in spent if isinstance(n, str)] if is_array(spent) else []


def _fail_taken_over(turn_id: str) -> Updater:
    """Marks a dead detached holder's pending row failed, so it no longer reads as running."""
    return fail_pending(
        ErrorInfo(status="ABORTED", message=f"its claim lapsed and turn {turn_id} took the interrupt over")
    )


def conflict(parent_id: str, holder: str | None, *, answered: bool, lapsed: bool = False) -> ClaimConflictError:
    """The refusal a losing resume gets, naming the winner."""
    if lapsed:
        return ClaimConflictError(
            f"This turn's claim on snapshot {parent_id} lapsed"
            + (f" and turn {holder} took it over" if holder else "")
            + "; its result was not saved. Load the session's latest snapshot to continue.",
            winner=holder,
        )
    if answered:
        return ClaimConflictError(
            f"Snapshot {parent_id} was already resumed by turn {holder}; each interrupt is answered once. "
            f"Load snapshot {holder} to continue from there.",
            winner=holder,
        )
    return ClaimConflictError(
        f"Snapshot {parent_id} is being resumed by turn {holder}; each interrupt is answered once. "
        f"Wait for snapshot {holder} and continue from there.",
        winner=holder,
    )
