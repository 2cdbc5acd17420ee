"""Moving a deadline: a permitted identity gives a paused call more time, audited.

:meth:`Inbox.extend <interlock.inbox.Inbox.extend>` calls :func:`extend`: the same people who may
answer the call may extend it (:func:`interlock.interrupts._policy.check_extension`); the new
deadline, the audit mark (``metadata.extended``: who, when, from, to) and the new timers
(``deadline.due``, and ``deadline.warn`` with a warning) are one write. The old timers find the
deadline moved: the due one waits for the new time, the warning does nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from .. import metadata as md
from .._engine.commit import deadline_timers, interrupt_data
from ..agents._delegation import tool_for
from ..errors import FailedPreconditionError, InvalidArgumentError
from ..interrupts._policy import AnswerPolicy, call_key, check_extension, recorded
from ..interrupts._who import identity_key
from ..records._sessions import utcnow
from ..records.snapshots import NoChange, extend_deadline

if TYPE_CHECKING:
    from ..parts import ToolRequestPart
    from ..stores import SessionStore
    from ._items import PendingInterrupt, ResumableAgent


def policies(agent: ResumableAgent | None, part: ToolRequestPart) -> tuple[AnswerPolicy, ...] | None:
    """The answer policies of the tool that paused ``part`` (``None``: that tool is not known here)."""
    found = tool_for(agent, part)
    return None if found is None else found.policies


async def extend(
    store: SessionStore,
    item: PendingInterrupt,
    agent: ResumableAgent | None,
    *,
    by: timedelta | None,
    until: datetime | None,
    identity: object,
    tenant: str | None,
) -> datetime:
    """Move ``item``'s deadline (``by`` more, or ``until``); returns the new deadline."""
    deadline = md.deadline_of(item.part)
    if deadline is None:
        raise FailedPreconditionError(f"{item.label} has no deadline to extend")
    declared = policies(agent, item.part)
    if declared is None and md.POLICY in (item.part.metadata or {}):
        raise FailedPreconditionError(
            f"{item.label} is asked under an answer policy, and agent {item.agent!r} is not served here to check it"
        )
    check_extension(declared or (), item.part, identity)
    old = datetime.fromisoformat(str(deadline.get("expiresAt")))
    if (by is None) == (until is None):
        raise InvalidArgumentError("extend the deadline either by a duration or until a time, one of them")
    new = until if until is not None else old + (by or timedelta(0))
    if new <= old:
        raise InvalidArgumentError(f"an extension moves the deadline later than {old.isoformat()}, not to {new}")
    at = new.isoformat()
    mark = {
        "by": identity_key(identity),
        "at": utcnow().isoformat(),
        "policy": (recorded(item.part) or {}).get("digest"),
    }
    data = interrupt_data(item.agent or "", item.session_id, item.snapshot_id, item.part) | {"expiresAt": at}
    events = deadline_timers(data, {**deadline, "expiresAt": at}, tenant)
    try:
        await store.save_all(
            [(item.snapshot_id, extend_deadline(call_key(item.part), at, mark))], tenant=tenant, events=events
        )
    except NoChange as exc:
        raise FailedPreconditionError(f"{item.label}: {exc}; there is no deadline to extend any more") from None
    return new
