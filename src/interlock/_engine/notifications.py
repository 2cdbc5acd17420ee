"""The outbox events a turn's commit owes: webhook notifications and deadline timers.

:func:`commit_events` is the one place that decides them; the runtime writes what it
returns in the same transaction as the turn's snapshot (:mod:`interlock.records._outbox`).

=========================  ===========================================================
event (channel)            written when
=========================  ===========================================================
``interrupt.created``      a turn pauses: one per pending interrupt (agents built with
(webhook)                  ``notify=True``); carries the resume token when the agent
                           mints them, and the deadline when there is one
``effect.in_doubt``        the same, for a call the effect journal paused
(webhook)                  (:func:`interlock.metadata.is_in_doubt`)
``interrupt.answered``     a resume commits: one per answered call (``notify=True``)
(webhook)
``interrupt.expired``      the same, for a call a passed deadline's policy answered
(webhook)                  (:mod:`interlock.notify._deadlines`)
``deadline.due``           a turn pauses on an interrupt with a deadline (every
(deadline)                 server-managed agent); due at the deadline
``deadline.warn``          the same, with ``warn_before``: due that long before it
(deadline)                 (the sweeper sends ``interrupt.expiring``, once)
=========================  ===========================================================

``interrupt.escalated`` is written by :mod:`interlock.notify._deadlines` itself, with the
escalation marker it sets on the snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from .. import metadata as md
from ..interrupts._decisions import decision_of
from ..messages import Message
from ..parts import ToolRequestPart
from ..records._outbox import DEADLINE, WEBHOOK, OutboxEvent, new_event
from ..records._sessions import utcnow

if TYPE_CHECKING:
    from ..interrupts._plan import ResumePlan


def interrupt_data(agent: str, session_id: str, snapshot_id: str, part: ToolRequestPart) -> dict[str, Any]:
    """What a webhook says of a pending interrupt (the paused request ``part`` in ``snapshot_id``)."""
    deadline = md.deadline_of(part) or {}
    return {
        "agent": agent,
        "sessionId": session_id,
        "snapshotId": snapshot_id,
        "tool": part.name,
        "ref": part.ref,
        "input": part.input,
        md.INTERRUPT: part.meta(md.INTERRUPT),
        "inDoubt": md.is_in_doubt(part),
        md.RESUME_TOKEN: md.resume_token(part),
        "expiresAt": deadline.get("expiresAt"),
    }


def _passed(part: ToolRequestPart, now: datetime) -> bool:
    at = (md.deadline_of(part) or {}).get("expiresAt")
    try:
        return isinstance(at, str) and datetime.fromisoformat(at) <= now
    except ValueError:
        return False


def _answered(
    agent: str, session_id: str, parent_id: str, turn_id: str, plan: ResumePlan, by: Any, tenant: str | None
) -> list[OutboxEvent]:
    now = utcnow()
    events: list[OutboxEvent] = []
    for call in plan.calls:
        entry = call.response if call.verb == "respond" else call.restart
        if entry is None:
            continue
        policy = md.expired_by(entry) if _passed(call.request, now) else None
        data = {
            "agent": agent,
            "sessionId": session_id,
            "snapshotId": parent_id,
            "answeredIn": turn_id,
            "tool": call.request.name,
            "ref": call.request.ref,
            "verb": call.verb,
            "decision": call.decision or decision_of(entry),
            "by": by,
        }
        if policy is not None:
            events.append(new_event(WEBHOOK, "interrupt.expired", data | {"policy": policy}, tenant=tenant))
        else:
            events.append(new_event(WEBHOOK, "interrupt.answered", data, tenant=tenant))
    return events


def _paused(
    agent: str, session_id: str, snapshot_id: str, messages: Sequence[Message], notify: bool, tenant: str | None
) -> list[OutboxEvent]:
    last = messages[-1] if messages else None
    if last is None or last.role != "model":
        return []
    events: list[OutboxEvent] = []
    for part in last.interrupts:
        data = interrupt_data(agent, session_id, snapshot_id, part)
        if notify:
            kind = "effect.in_doubt" if data["inDoubt"] else "interrupt.created"
            events.append(new_event(WEBHOOK, kind, data, tenant=tenant))
        events += deadline_timers(data, md.deadline_of(part), tenant)
    return events


def deadline_timers(data: dict[str, Any], deadline: dict[str, Any] | None, tenant: str | None) -> list[OutboxEvent]:
    """The timers of a pending interrupt's deadline: ``deadline.due`` at it, ``deadline.warn`` ``warnBefore`` earlier.

    ``data`` is :func:`interrupt_data`'s (its ``expiresAt`` the deadline's); a moved deadline gets new timers
    (the old ones find it moved and wait, or do nothing).
    """
    at = cast(str | None, data.get("expiresAt"))
    if at is None:
        return []
    due = datetime.fromisoformat(at)
    timer = {k: data[k] for k in ("agent", "sessionId", "snapshotId", "tool", "ref", "expiresAt")}
    events = [new_event(DEADLINE, "deadline.due", timer, tenant=tenant, due_at=due)]
    warn = (deadline or {}).get("warnBefore")
    if isinstance(warn, (int, float)) and not isinstance(warn, bool):
        events.append(new_event(DEADLINE, "deadline.warn", timer, tenant=tenant, due_at=due - timedelta(seconds=warn)))
    return events


def commit_events(
    *,
    agent: str,
    notify: bool,
    tenant: str | None,
    session_id: str,
    turn_id: str,
    parent_id: str | None,
    finish: str | None,
    messages: Sequence[Message],
    plan: ResumePlan | None,
    by: Any = None,
) -> list[OutboxEvent]:
    """The outbox rows of a turn's commit (see the module's table); ``by`` is the audit's answerer."""
    events: list[OutboxEvent] = []
    if notify and plan is not None and parent_id is not None:
        events += _answered(agent, session_id, parent_id, turn_id, plan, by, tenant)
    if finish == "interrupted":
        events += _paused(agent, session_id, turn_id, messages, notify, tenant)
    return events
