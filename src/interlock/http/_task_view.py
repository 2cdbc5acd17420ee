"""A protocol's task read from interlock's snapshots: the one walk every task-shaped protocol uses (A2A, MCP).

There is no task store: a task *is* snapshots. Its id is the snapshot id of the turn that
started it (the pending row of a detached run); a resume continues it, and the snapshot it
answered names the resuming turn (its claim's holder, ``claimed_by``), so :func:`follow`
walks from the task's first snapshot to its current one through the store (the seam's
``read``), and every process sees the same task.

A task is cancelled while it waits by answering each paused call with a rejection
(:func:`cancel_answer`, carrying a cancel note), so the call never runs and the audit record
says who cancelled it; :func:`is_cancel` reads that record back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from .._json_object import is_object
from ..inbox._answers import Answer, Reject
from ..records._sessions import Snapshot
from ..records.snapshots import claim_state
from ._service import AgentService, Caller

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
"""Where a task stands (each protocol spells these its own way)."""
CANCEL_NOTES = (
    "The task was canceled (A2A CancelTask); the call did not run.",
    "The task was cancelled (MCP tasks/cancel); the call did not run.",
)
"""The notes a cancelled task's paused calls are answered with, by protocol (A2A's first)."""
MAX_HOPS = 1000
"""The most resumes one task is followed through."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskView:
    """A task as the store has it: its first snapshot's id, its current snapshot, the last answer given."""

    task_id: str
    started: datetime
    """When the task's first snapshot was written."""
    current: Snapshot
    status: TaskStatus
    answered: Snapshot | None = None
    """The last snapshot of the task that was answered (the current one's parent in the task), if any."""
    answer_meta: Mapping[str, Any] | None = None
    """What that answer recorded (``metadata.resume``: who, when, what)."""


async def follow(service: AgentService, agent: str, task_id: str, caller: Caller) -> TaskView:
    """The task ``task_id``: from its first snapshot through every resume to the current one."""
    snap = await service.read(agent, snapshot_id=task_id, caller=caller)
    started = snap.created_at
    answered: Snapshot | None = None
    meta: Mapping[str, Any] | None = None
    cancelled = False
    for _ in range(MAX_HOPS):
        claim = claim_state(snap) if snap.finish_reason == "interrupted" else "free"
        if claim != "answered" or snap.claimed_by is None:
            status = "cancelled" if cancelled else status_of(snap, working=claim == "held")
            return TaskView(
                task_id=task_id, started=started, current=snap, status=status, answered=answered, answer_meta=meta
            )
        answered = snap
        snap = await service.read(agent, snapshot_id=snap.claimed_by, caller=caller)
        found: Any = (snap.metadata or {}).get("resume")
        meta = found if is_object(found) else {}
        cancelled = cancelled or is_cancel(meta)
    status = status_of(snap, working=False)
    return TaskView(task_id=task_id, started=started, current=snap, status=status, answered=answered)


def status_of(snap: Snapshot, *, working: bool) -> TaskStatus:
    """The status of a task whose current snapshot is ``snap`` (``working``: an answer is being run)."""
    status = snap.read_status()
    if status == "pending" or working:
        return "working"
    if status == "aborted":
        return "cancelled"
    if status in ("failed", "expired"):
        return "failed"
    if snap.finish_reason == "interrupted":
        return "input_required"
    return "completed"


def is_cancel(meta: Mapping[str, Any]) -> bool:
    """Whether a resume's audit record (``metadata.resume``) is a cancel's: every call answered with a cancel note."""
    given: list[Any] = [*(meta.get("respond") or []), *(meta.get("restart") or [])]
    rows = [r for r in given if is_object(r)]
    return bool(rows) and all(_is_cancel_note(r.get("output", r.get("payload"))) or _is_cancel_note(r) for r in rows)


def _is_cancel_note(value: Any) -> bool:
    if is_object(value):
        return value.get("message") in CANCEL_NOTES or value.get("reason") in CANCEL_NOTES
    return value in CANCEL_NOTES


def cancel_answer(options: Mapping[str, Mapping[str, Any]], note: str) -> Answer:
    """The answer a cancel gives one paused call: a rejection whose output says so (the call does not run).

    The output is ``{"canceled": true, "message": note}`` where the call's result takes that
    object, or ``note`` where it is text; a call whose result takes neither is rejected with
    ``note`` as the reason (the tool gets its denial). ``note`` is one of :data:`CANCEL_NOTES`.
    """
    schema: Any = (options.get("respond") or {}).get("output_schema")
    kind = schema.get("type") if is_object(schema) else None
    if schema is None or (kind == "object" and _takes_note(schema)):
        return Reject(output={"canceled": True, "message": note})
    if kind == "string":
        return Reject(output=note)
    return Reject(reason=note)


def _takes_note(schema: Mapping[str, Any]) -> bool:
    """Whether an object schema admits ``{"canceled": true, "message": ...}`` (requires nothing else, allows both)."""
    required: Any = schema.get("required") or []
    properties: Any = schema.get("properties") or {}
    extra = schema.get("additionalProperties", True) is not False
    return set(required) <= {"canceled", "message"} and (extra or {"canceled", "message"} <= set(properties))
