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

This module is the lease *process* (take, keep fresh, fenced commit, release). The claim
rules (:func:`claim_state`, the one rule for "is this interrupt taken") and every change of
a claim are :mod:`interlock.records.snapshots`'s; they are re-exported here.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import ClaimConflictError
from ..records._outbox import OutboxEvent
from ..records._sessions import Snapshot
from ..records.snapshots import (
    Ballot,
    ClaimTake,
    answer_claim,
    conflict,
    fail_taken_over,
    refresh_claim,
    release_claim,
    settle_claimed,
    take_claim,
)
from ..records.snapshots import ClaimState as ClaimState
from ..records.snapshots import claim_state as claim_state
from ..records.snapshots import consumed_tokens as consumed_tokens
from ..records.snapshots import is_answerable as is_answerable
from ..records.snapshots import refuse_spent as refuse_spent
from ..stores import JournalUpdater, SnapshotStore, Updater
from ..telemetry import _hooks as hooks


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

        See :meth:`vote` for a resume that casts quorum votes.

        ``journal`` is written in the claim's transaction (the intents of the calls the
        resume restarts, :meth:`interlock._engine.effects.Effects.prepare`): only if the claim is taken.

        ``nonces`` are the resume tokens' (:mod:`interlock.interrupts._tokens`): they are spent by the
        hold's fenced commit, in the same transaction (a hold released without committing
        leaves them unspent). A token spent on ``parent_id`` was spent by the answer that
        won, so its resume is refused like any other second answer: ABORTED naming the winner.

        Raises:
            ClaimConflictError: another resume holds the claim, or already answered (a spent
                token's resume included).
            PermissionDeniedError: a token was spent (``replayed``) on a snapshot nobody answered.
            SnapshotNotFoundError: there is no such snapshot.
        """
        hold = await self.vote(parent_id, turn_id, nonces=nonces, journal=journal)
        assert hold is not None
        return hold

    async def vote(
        self,
        parent_id: str,
        turn_id: str,
        *,
        nonces: Sequence[str] = (),
        journal: Sequence[tuple[str, JournalUpdater]] = (),
        ballots: Sequence[Ballot] = (),
    ) -> ClaimHold | None:
        """:meth:`take`, recording ``ballots`` (quorum votes) in the same write first.

        ``None`` when the votes were recorded without reaching every call's quorum (nothing is
        claimed, ``journal`` is not written); else the hold, as :meth:`take` gives it: the vote
        that reaches the quorum claims the row in the write that records it, so of racing voters
        exactly one resumes. A voter already recorded is refused (``already_voted``).
        """
        steal: str | None = None
        for _ in range(3):
            take = take_claim(turn_id, ttl=self.ttl, steal=steal, nonces=nonces, ballots=ballots)
            writes: list[tuple[str, Updater]] = [(parent_id, take)]
            if steal is not None:
                writes.append((steal, fail_taken_over(turn_id)))
            entries = [(key, _if_taken(take, update)) for key, update in journal]
            written = await self.store.save_all(writes, tenant=self.tenant, journal=entries)
            if take.voted_only:
                return None
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
    _timer: asyncio.TimerHandle | None = field(default=None, repr=False)

    def start(self) -> None:
        """Refresh the lease every ``ttl / 3`` seconds (a timer: most turns end before it fires, and cost no task)."""
        self._timer = asyncio.get_running_loop().call_later(self.claims.ttl / 3, self._due)

    def _due(self) -> None:
        self._timer = None
        if not self.done:
            self._refresher = asyncio.ensure_future(self._keep_fresh())

    async def _keep_fresh(self) -> None:
        claims = self.claims
        try:
            refresh = refresh_claim(self.parent_id, self.turn_id, claims.ttl)
            if await claims.store.save(self.parent_id, refresh, tenant=claims.tenant) is None:
                return
        except ClaimConflictError as exc:
            self.lost = exc.message
            hooks.claim_lost(self.parent_id, self.turn_id, exc.message)
            return
        except Exception:  # the store is unreachable: the lease runs out, and the commit will refuse
            pass
        if self._refresher is not None:  # not stopped meanwhile: the next refresh
            self._refresher = None
            self.start()

    def commit_updater(self) -> Updater:
        """The updater that fences a commit: the claim must still be held by this turn; it becomes answered.

        It spends the hold's token nonces in the same write. Write it with the turn's
        snapshot in one :meth:`~interlock.stores.SnapshotStore.save_all`.
        """
        return answer_claim(self.parent_id, self.turn_id, self.nonces)

    def own_updater(self, update: Updater) -> Updater:
        """For a claim on the very row the holder writes (a worker's lease on a pending snapshot).

        The fence of :meth:`commit_updater`, then ``update``; the written row's claim is cleared
        (a finished turn's row is not held by anyone). Write it with ``store.save_all``, then
        call :meth:`settled`.
        """
        return settle_claimed(self.commit_updater(), update)

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
            await self.claims.store.save(self.parent_id, release_claim(self.turn_id), tenant=self.claims.tenant)

    def _stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._refresher is not None:
            self._refresher.cancel()
            self._refresher = None


def _if_taken(take: ClaimTake, update: JournalUpdater) -> JournalUpdater:
    """``update``, applied only when ``take`` took the claim (its row is written before journal entries)."""
    return lambda cur: update(cur) if take.lapsed is None and not take.voted_only else None
