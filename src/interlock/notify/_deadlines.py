"""The deadline sweeper: when an interrupt's deadline passes, its policy applies exactly once.

Deadlines are declared on tools and interrupts (:mod:`interlock.tools._expiry`); each paused
turn's commit writes one timer per deadline into the store's outbox (channel
``deadline``, due at the deadline). :func:`sweep` takes the due timers with a lease
(:meth:`~interlock.stores.OutboxStore.outbox_claim`), so two sweepers do not work on
one at a time, and for each:

* the interrupt no longer waits (answered, the session went on, deleted): nothing to do;
* a resume holds its claim right now: try again later (if that resume fails, the
  interrupt waits again);
* ``reject`` / ``respond``: the sweeper resumes the snapshot through its agent, as the
  identity ``interlock.notify._deadlines``, answering the call with the policy's respond entry.
  The resume's claim (:mod:`interlock._engine.commit`) makes this exactly once across every
  sweeper, server and person: of racing answers one commits, the others get ``ABORTED``.
  The audit record names the policy (``expired``) and the commit writes an
  ``interrupt.expired`` webhook with it. A resume answers every interrupt of the paused
  turn, so this waits until each of them has passed a ``reject``/``respond`` deadline;
* a warning timer (``deadline.warn``, from ``warn_before=``): in one atomic write the snapshot
  is marked (``metadata.warned``, per deadline) and an ``interrupt.expiring`` webhook is added to
  the outbox; a second sweeper finds the mark and does nothing; an extended deadline's old
  timers find it moved (the due one waits for the new time);
* ``escalate``: in one atomic write the snapshot is marked (``metadata.escalated``) and an
  ``interrupt.escalated`` webhook for the policy's group is added to the outbox; a second
  sweeper finds the mark and does nothing. The interrupt keeps waiting.

Run it in a loop with :func:`run_deadlines` (``interlock deadlines run --store URL
--agents module:attr``, or ``interlock serve ... --deadlines``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, TypeAlias, cast

from .. import metadata as md
from .._engine.commit import interrupt_data
from ..errors import ClaimConflictError, FailedPreconditionError, InterlockError, SnapshotNotFoundError
from ..inbox._inbox import Inbox, PendingInterrupt
from ..inbox._items import ResumableAgent
from ..interrupts._decisions import Decision
from ..interrupts._plan import Resume
from ..interrupts._policy import DEADLINE_IDENTITY, call_key
from ..parts import ToolRequestPart, ToolResponsePart
from ..records._outbox import DEADLINE, KEEP_SETTLED, WEBHOOK, OutboxEvent, Retention, backoff, new_event
from ..records._sessions import new_id, utcnow
from ..records.snapshots import NoChange, claim_state, mark_escalated, mark_warned
from ..stores import SessionStore, SnapshotStore
from ..tools._expiry import OnExpire, expiry_note

logger = logging.getLogger("interlock.deadlines")

IDENTITY = DEADLINE_IDENTITY
"""Who the audit trail says answered a call whose deadline passed."""

ExpiryResult: TypeAlias = Literal["applied", "answered", "later", "failed"]
"""``applied``: this sweeper applied the policy; ``answered``: nothing to do (answered, gone, or
applied by another); ``later``: not yet (a resume holds the claim, or another interrupt of the
turn is not due): the timer is due again later; ``failed``: the policy could not apply now
(e.g. the agent is unknown here): retried with backoff."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Expiry:
    """What one sweep did with one due timer."""

    snapshot_id: str
    tool: str
    ref: str | None
    policy: str | None
    result: ExpiryResult
    message: str = ""
    retry_at: datetime | None = None
    """``later``: when the timer is due again (``None``: after the sweep's retry delay)."""


class _Later(Exception):
    def __init__(self, message: str, at: datetime | None = None) -> None:
        super().__init__(message)
        self.at = at


async def sweep(
    store: SessionStore,
    agents: Mapping[str, ResumableAgent] | Sequence[ResumableAgent] = (),
    *,
    holder: str | None = None,
    lease: float = 120.0,
    limit: int = 50,
    retry_base: float = 5.0,
    identity: str = IDENTITY,
) -> list[Expiry]:
    """Apply the policy of every due deadline once; returns what happened to each timer taken.

    ``agents`` resume ``reject``/``respond`` answers (by name, as for :class:`~interlock.inbox.Inbox`);
    ``escalate`` needs none. ``lease`` bounds how long one timer's work may take before
    another sweeper may take it over (the claim still keeps the answer to one).
    """
    holder = holder or f"deadlines-{new_id()}"
    inbox = Inbox(store, agents=agents)
    done: list[Expiry] = []
    for row in await store.outbox_claim(channel=DEADLINE, holder=holder, lease=lease, limit=limit):
        outcome = await _one(inbox, store, row, identity)
        done.append(outcome)
        await store.outbox_settle(_settled(row, outcome, retry_base), holder=holder)
    return done


def _settled(row: OutboxEvent, outcome: Expiry, retry_base: float) -> OutboxEvent:
    now = utcnow()
    attempts = row.attempts + 1
    if outcome.result in ("applied", "answered"):
        return row.evolve(status="done", attempts=attempts, settled_at=now, last_error=None)
    if outcome.result == "later":
        at = outcome.retry_at or now + timedelta(seconds=retry_base)
        return row.evolve(attempts=attempts, due_at=at, last_error=outcome.message)
    wait = backoff(attempts, base=retry_base, cap=600.0)
    return row.evolve(attempts=attempts, due_at=now + timedelta(seconds=wait), last_error=outcome.message)


async def _one(inbox: Inbox, store: SnapshotStore, row: OutboxEvent, identity: str) -> Expiry:
    data = row.data
    sid, tool, ref = str(data.get("snapshotId")), str(data.get("tool")), cast(str | None, data.get("ref"))

    def outcome(
        result: ExpiryResult, policy: str | None = None, message: str = "", at: datetime | None = None
    ) -> Expiry:
        return Expiry(snapshot_id=sid, tool=tool, ref=ref, policy=policy, result=result, message=message, retry_at=at)

    policy: OnExpire | None = None
    try:
        items = await _waiting(inbox, store, sid, row.tenant)
        item = next((i for i in items if i.tool == tool and i.ref == ref), None)
        deadline = None if item is None else md.deadline_of(item.part)
        if item is None or deadline is None:
            raise NoChange("the call no longer waits")
        if row.type == "deadline.warn":
            await _warn(store, item, deadline, row, identity)
            return outcome("applied", "warn")
        at = datetime.fromisoformat(str(deadline.get("expiresAt")))
        if at > utcnow():  # the deadline was extended: this timer waits for the new one
            raise _Later(f"{item.label}'s deadline moved to {at.isoformat()}", at)
        policy = OnExpire.from_json(deadline.get("onExpire"))
        if policy.policy == "escalate":
            await _escalate(store, item, policy, row.tenant, identity)
        else:
            await _answer(inbox, items, row.tenant, identity)
        logger.info("deadline of %s in %s: %s applied", item.label, sid, policy.policy)
        return outcome("applied", policy.policy)
    except NoChange as exc:
        return outcome("answered", None if policy is None else policy.policy, str(exc))
    except _Later as exc:
        return outcome("later", None if policy is None else policy.policy, str(exc), exc.at)
    except InterlockError as exc:
        logger.warning("deadline of %s#%s in %s: %s", tool, ref, sid, exc.message)
        return outcome("failed", None if policy is None else policy.policy, exc.message)
    except Exception as exc:  # e.g. a damaged deadline: retried with backoff, never ends the loop
        logger.exception("deadline of %s#%s in %s failed", tool, ref, sid)
        return outcome("failed", None if policy is None else policy.policy, f"{type(exc).__name__}: {exc}")


async def _waiting(inbox: Inbox, store: SnapshotStore, snapshot_id: str, tenant: str | None) -> list[PendingInterrupt]:
    """The snapshot's pending interrupts; raises :class:`NoChange` or :class:`_Later` when it does not wait now."""
    snap = await store.load(snapshot_id, tenant=tenant)
    if snap is None:
        raise NoChange("the snapshot was deleted")
    if claim_state(snap) == "held":
        raise _Later(f"a resume ({snap.claimed_by}) holds the interrupt now")
    try:
        return await inbox.get(snapshot_id, tenant=tenant)
    except (ClaimConflictError, FailedPreconditionError, SnapshotNotFoundError) as exc:
        raise NoChange(exc.message) from None


def _label(part: ToolRequestPart) -> str:
    return f"{part.name}#{part.ref}" if part.ref else part.name


async def _escalate(
    store: SnapshotStore, item: PendingInterrupt, policy: OnExpire, tenant: str | None, by: str
) -> None:
    """Mark the escalation on the snapshot and add its webhook, in one write (once: the mark is checked)."""
    mark = mark_escalated(_label(item.part), {"at": utcnow().isoformat(), "group": policy.group, "by": by})
    data = interrupt_data(item.agent or "", item.session_id, item.snapshot_id, item.part)
    event = new_event(
        WEBHOOK,
        "interrupt.escalated",
        data | {"policy": "escalate", "group": policy.group},
        tenant=tenant,
        group=policy.group,
    )
    await store.save_all([(item.snapshot_id, mark)], tenant=tenant, events=[event])


async def _warn(
    store: SnapshotStore, item: PendingInterrupt, deadline: dict[str, Any], row: OutboxEvent, by: str
) -> None:
    """Send ``interrupt.expiring`` for the deadline the timer was set for, once (the mark and webhook: one write)."""
    at = deadline.get("expiresAt")
    if at != row.data.get("expiresAt"):
        raise NoChange("the deadline moved; its new timers warn of it")
    mark = mark_warned(call_key(item.part), str(at), {"at": utcnow().isoformat(), "by": by})
    data = interrupt_data(item.agent or "", item.session_id, item.snapshot_id, item.part)
    event = new_event(
        WEBHOOK, "interrupt.expiring", data | {"warnBefore": deadline.get("warnBefore")}, tenant=row.tenant
    )
    await store.save_all([(item.snapshot_id, mark)], tenant=row.tenant, events=[event])


def _entry(item: PendingInterrupt, now: datetime) -> ToolResponsePart:
    """The respond entry of one call's passed ``reject``/``respond`` deadline; raises :class:`_Later` if not due."""
    deadline = md.deadline_of(item.part)
    if deadline is None:
        raise _Later(f"{item.label} has no deadline, and a resume must answer every interrupt of the turn")
    policy = OnExpire.from_json(deadline.get("onExpire"))
    at = datetime.fromisoformat(str(deadline.get("expiresAt")))
    if policy.policy == "escalate":
        raise _Later(f"{item.label} escalates; a resume must answer every interrupt of the turn")
    if at > now:
        raise _Later(f"{item.label} is due at {at.isoformat()}", at)
    if policy.policy == "reject":
        output = expiry_note(policy, item.tool) if policy.output is None else policy.output
        decision = Decision.respond(output, decision="deny", note={md.EXPIRED: "reject"})
    else:
        decision = Decision.respond(policy.output, note={md.EXPIRED: "respond"})
    entry = decision.answer(item.part)
    assert isinstance(entry, ToolResponsePart)
    return entry


async def _answer(inbox: Inbox, items: list[PendingInterrupt], tenant: str | None, identity: str) -> None:
    """Resume the snapshot with every call's expiry answer, through its agent (the claim keeps it to one)."""
    now = utcnow()
    entries = [_entry(i, now) for i in items]
    first = items[0]
    agent = inbox.agents.get(first.agent or "")
    if agent is None:
        raise FailedPreconditionError(
            f"snapshot {first.snapshot_id} belongs to agent {first.agent!r}, which this sweeper was not given; "
            "pass it in agents= (command line: --agents module:attr)"
        )
    output = await agent.run(
        resume=Resume(respond=entries), snapshot_id=first.snapshot_id, context={"identity": identity, "tenant": tenant}
    )
    if output.error is not None and output.error.status == "ABORTED":  # another answer claimed it first
        assert inbox.store is not None
        snap = await inbox.store.load(first.snapshot_id, tenant=tenant)
        if snap is None or claim_state(snap) == "answered":
            raise NoChange(f"answered by another: {output.error.message}")
        raise _Later(output.error.message)
    output.raise_for_error()


async def run_deadlines(
    store: SessionStore,
    agents: Mapping[str, ResumableAgent] | Sequence[ResumableAgent] = (),
    *,
    interval: float = 1.0,
    stop: asyncio.Event | None = None,
    keep_settled: timedelta | None = KEEP_SETTLED,
    **options: Any,
) -> None:
    """Call :func:`sweep` every ``interval`` seconds until ``stop`` is set (or the task is cancelled).

    A sweep that fails (the store is unavailable, anything else) is logged and tried again next time.
    Once an hour it also prunes the timers settled more than ``keep_settled`` ago (``None``: never).
    """
    stop = stop or asyncio.Event()
    options.setdefault("holder", f"deadlines-{new_id()}")
    retention = Retention(keep_settled)
    while not stop.is_set():
        try:
            await sweep(store, agents, **options)
            if (cutoff := retention.cutoff()) is not None:
                await store.outbox_prune(channel=DEADLINE, settled_before=cutoff)
        except InterlockError as exc:
            logger.warning("deadline sweep failed: %s", exc.message)
        except Exception:  # a loop beside a server must outlive one bad pass
            logger.exception("deadline sweep failed")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(interval):
                await stop.wait()
