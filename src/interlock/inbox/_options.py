"""What a pending interrupt takes as an answer, and who won when an answer lost.

Two rules every answering surface shares (the inbox's API and page, and each protocol
adapter through :class:`~interlock.http._service.AgentService`):

- :func:`answer_options`: the answers an interrupt takes (approve, reject, respond, restart,
  edit), each with the JSON Schema of what it carries, read off the tool that paused it;
- :func:`answered`: the refusal of an answer that lost (``ABORTED``), naming who answered
  first and when, as :class:`AnsweredError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..agents._agent import PromptAgent
from ..agents._delegation import tool_for
from ..errors import AbortedError, ClaimConflictError
from ..records.snapshots import claim_state
from ..tools._tool import Tool
from ._answers import DECISIONS
from ._inbox import Inbox
from ._items import AuditEntry, PendingInterrupt


class AnsweredError(ClaimConflictError):
    """The interrupt was already answered (or is being answered): ABORTED, with who and when in ``details``."""


def paused_by(agents: Mapping[str, object], item: PendingInterrupt) -> Tool[Any, Any, Any] | None:
    """The tool that paused ``item`` (among ``agents``, by name): its agent's, or a sub-agent's for a surfaced one."""
    agent = agents.get(item.agent or "") if item.agent else None
    return tool_for(agent, item.part) if isinstance(agent, PromptAgent) else None


def answer_options(agents: Mapping[str, object], item: PendingInterrupt) -> dict[str, dict[str, Any]]:
    """The answers ``item`` takes, each with the JSON Schema of what it carries (``None``: any JSON).

    The one source of the decisions and schemas every surface offers: the inbox's forms and
    API, and the protocol adapters (through :meth:`interlock.http._service.AgentService.options`).
    ``agents`` are the agents by name (the one that paused ``item`` among them).
    """
    agent = agents.get(item.agent or "") if item.agent else None
    found = paused_by(agents, item)
    output = found.definition.output_schema if found else None
    resume = found.resume_schema if found else None
    options: dict[str, dict[str, Any]] = {"respond": {"output_schema": output}}
    if found is not None and found.is_interrupt_only:
        return options
    options["approve"] = {"payload_schema": resume}
    options["reject"] = {"payload_schema": None if item.in_doubt else resume, "reason": True}
    if not item.is_hold:
        options["restart"] = {"payload_schema": resume}
    if getattr(agent, "allow_replaced_input", False) and not item.in_doubt:
        options["edit"] = {"input_schema": found.definition.input_schema if found else None, "payload_schema": resume}
    return {k: options[k] for k in DECISIONS if k in options}


async def answered(inbox: Inbox, snapshot_id: str, tenant: str | None, exc: AbortedError) -> AbortedError:
    """The refusal of an answer that lost: who answered first and when (the claim, then the audit trail).

    The one rule for a losing answer's status, however the loss was found (the snapshot read
    as claimed, the claim refused, a spent resume token): the snapshot's claim names the
    winning turn, whose audit entry names who answered. An ``exc`` with no claim behind it
    is returned as it is.
    """
    snap = await inbox.store.load(snapshot_id, tenant=tenant) if inbox.store else None
    if snap is None or claim_state(snap) not in ("held", "answered"):
        return exc
    winner = snap.claimed_by
    child = await inbox.store.load(winner, tenant=tenant) if winner and inbox.store else None
    entry = AuditEntry.from_snapshot(child) if child is not None else None
    by, at = (entry.by, entry.at.isoformat() if entry.at else None) if entry else (None, None)
    if by is not None:
        message = f"snapshot {snapshot_id} was already answered by {by}" + (f" at {at}" if at else "")
    elif entry is not None:
        message = f"snapshot {snapshot_id} was already answered" + (f" at {at}" if at else "")
    else:
        message = f"snapshot {snapshot_id} is being answered (turn {winner}); each interrupt is answered once"
    error = AnsweredError(message, winner=winner)
    error.details = {"winner": winner, "answered_by": by, "answered_at": at}
    return error
