"""What the inbox's HTTP API and page do, framework-free: filters, pages, details, answers, the audit trail.

Every answer runs through :meth:`interlock.inbox.Inbox.answer`, so it is validated exactly
like any resume (history, schemas, resume tokens) and claimed exactly once. A refusal is
an :class:`~interlock.errors.InterlockError` with its canonical status; an interrupt that
another answer won is :class:`AnsweredError` (ABORTED, 409) naming who answered and when.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ... import metadata as md
from ..._durations import parse_duration, parse_whole
from ..._engine.io import AgentOutput
from ..._json_object import is_array, is_object
from ..._wire import messages_to_json, output_to_json, part_to_json
from ...errors import AbortedError, ClaimConflictError, InvalidArgumentError, SnapshotNotFoundError
from ...inbox._answers import DECISIONS as DECISIONS
from ...inbox._answers import AnswerRequest as AnswerRequest
from ...inbox._answers import parse_answer as parse_answer
from ...inbox._inbox import Answer, AuditEntry, Inbox, PendingInterrupt
from ...inbox._options import AnsweredError as AnsweredError
from ...inbox._options import answer_options as options_for
from ...inbox._options import answered as answered
from ...inbox._options import paused_by
from ...interrupts._policy import votes_of
from ...interrupts._policy_view import answer_view

MAX_LIMIT = 500
"""The most interrupts one page lists."""
RECENT_MESSAGES = 20
"""How many of a session's latest messages a detail carries."""
_FILTERS = ("agent", "tool", "session", "older_than", "newer_than", "in_doubt", "order", "limit", "cursor")
MAX_ANSWERS = 100
"""The most answers one request gives (one per interrupt of a snapshot)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Filters:
    """A listing's filters and page (see :meth:`Inbox.pending`)."""

    agent: str | None = None
    tool: str | None = None
    session_id: str | None = None
    older_than: timedelta | None = None
    newer_than: timedelta | None = None
    in_doubt: bool | None = None
    newest_first: bool = False
    limit: int = 50
    after: tuple[datetime, str] | None = None


def parse_filters(query: Mapping[str, str]) -> Filters:
    """The filters a query string names; INVALID_ARGUMENT, saying what is accepted, for anything else."""
    unknown = sorted(set(query) - set(_FILTERS))
    if unknown:
        raise InvalidArgumentError(f"unknown query parameter {unknown[0]!r}; the listing takes {', '.join(_FILTERS)}")
    order = query.get("order") or "oldest"
    if order not in ("oldest", "newest"):
        raise InvalidArgumentError(f"order must be 'oldest' or 'newest', not {order!r}")
    return Filters(
        agent=query.get("agent") or None,
        tool=query.get("tool") or None,
        session_id=query.get("session") or None,
        older_than=_duration(query, "older_than"),
        newer_than=_duration(query, "newer_than"),
        in_doubt=_flag(query.get("in_doubt")),
        newest_first=order == "newest",
        limit=_limit(query.get("limit")),
        after=_cursor(query.get("cursor")),
    )


def _duration(query: Mapping[str, str], key: str) -> timedelta | None:
    text = query.get(key)
    return parse_duration(text, key) if text else None


def _flag(text: str | None) -> bool | None:
    if not text:
        return None
    if text not in ("true", "false"):
        raise InvalidArgumentError(f"in_doubt must be 'true' or 'false', not {text!r}")
    return text == "true"


def _limit(text: str | None) -> int:
    return parse_whole(text, "limit", low=1, high=MAX_LIMIT) if text else 50


def cursor_of(item: PendingInterrupt) -> str:
    """The opaque cursor that continues a listing after ``item``."""
    return f"{item.created_at.isoformat()}~{item.snapshot_id}"


def _cursor(text: str | None) -> tuple[datetime, str] | None:
    if not text:
        return None
    when, sep, snapshot_id = text.partition("~")
    with contextlib.suppress(ValueError):
        at = datetime.fromisoformat(when)
        if sep and snapshot_id and at.tzinfo is not None:
            return (at, snapshot_id)
    raise InvalidArgumentError(f"cursor {text!r} is not one this inbox gave out; use next_cursor of a listing")


# reading -------------------------------------------------------------------------------------


async def list_page(inbox: Inbox, filters: Filters, tenant: str | None) -> dict[str, Any]:
    """One page of pending interrupts: ``{"items": [...], "next_cursor": ...}``."""
    items = await inbox.pending(
        agent=filters.agent,
        tool=filters.tool,
        tenant=tenant,
        older_than=filters.older_than,
        newer_than=filters.newer_than,
        in_doubt=filters.in_doubt,
        session_id=filters.session_id,
        newest_first=filters.newest_first,
        after=filters.after,
        limit=filters.limit,
    )
    more = len(items) >= filters.limit
    return {
        "items": [item_json(inbox, i) for i in items],
        "next_cursor": cursor_of(items[-1]) if items and more else None,
    }


def item_json(inbox: Inbox, item: PendingInterrupt) -> dict[str, Any]:
    """One pending interrupt as the API shows it: its fields, label, resume token and allowed answers."""
    out = item.to_json()
    out.pop("tenant", None)
    return out | {
        "label": item.label,
        "resume_token": md.resume_token(item.part),
        "answers": answer_options(inbox, item),
    }


def _policy(inbox: Inbox, item: PendingInterrupt, votes: Mapping[str, Any], identity: Any) -> dict[str, Any] | None:
    found = paused_by(inbox.agents, item)
    return answer_view(found.policies if found else (), item.part, votes, identity)


def answer_options(inbox: Inbox, item: PendingInterrupt) -> dict[str, dict[str, Any]]:
    """The answers ``item`` takes, each with the JSON Schema of what it carries (``inbox._options.answer_options``)."""
    return options_for(inbox.agents, item)


async def waiting(inbox: Inbox, snapshot_id: str, tenant: str | None) -> list[PendingInterrupt]:
    """:meth:`Inbox.get`, with an answered snapshot refused as :class:`AnsweredError` (who answered, when)."""
    try:
        return await inbox.get(snapshot_id, tenant=tenant)
    except ClaimConflictError as exc:
        raise await answered(inbox, snapshot_id, tenant, exc) from None


async def detail(inbox: Inbox, snapshot_id: str, tenant: str | None, identity: Any = None) -> dict[str, Any]:
    """A snapshot's pending interrupts with their answer schemas, and its session's recent messages.

    An interrupt asked under an answer policy carries ``policy``: who may answer, the votes so far,
    and what ``identity`` may not do and why (:func:`interlock.interrupts._policy_view.answer_view`).
    """
    items = await waiting(inbox, snapshot_id, tenant)
    snap = await inbox.store.load(snapshot_id, tenant=tenant) if inbox.store else None
    votes = votes_of(snap)
    messages = snap.state.messages[-RECENT_MESSAGES:] if snap and snap.state else []
    first = items[0]
    return {
        "snapshot_id": snapshot_id,
        "session_id": first.session_id,
        "agent": first.agent,
        "created_at": first.created_at.isoformat(),
        "interrupts": [
            item_json(inbox, i) | {"part": part_to_json(i.part), "policy": _policy(inbox, i, votes, identity)}
            for i in items
        ],
        "messages": messages_to_json(messages),
    }


# answering -----------------------------------------------------------------------------------


def parse_answers(body: Mapping[str, Any]) -> AnswerRequest | list[AnswerRequest]:
    """One answer (``{"decision": ...}``), or one per interrupt (``{"answers": [{...}, ...]}``)."""
    if "answers" not in body:
        return parse_answer(body)
    extra = sorted(set(body) - {"answers"})
    if extra:
        raise InvalidArgumentError(f"a body with 'answers' takes nothing beside it (got {extra[0]!r})")
    given: object = body["answers"]
    if not is_array(given) or not given:
        raise InvalidArgumentError("'answers' must be a non-empty list of answers, one per interrupt")
    items: list[object] = given
    if len(items) > MAX_ANSWERS:
        raise InvalidArgumentError(f"at most {MAX_ANSWERS} answers per request, not {len(items)}")
    parsed: list[AnswerRequest] = []
    for n, item in enumerate(items):
        if not is_object(item):
            raise InvalidArgumentError(f"answers[{n}] must be an object with a 'decision', not {type(item).__name__}")
        parsed.append(parse_answer(item))
    return parsed


async def answer(
    inbox: Inbox,
    snapshot_id: str,
    given: AnswerRequest | Sequence[AnswerRequest],
    *,
    identity: Any,
    tenant: str | None,
) -> dict[str, Any]:
    """Give the answer, or one per interrupt (one resume, claimed exactly once); returns what the turn did.

    A snapshot that waits on several interrupts takes a list with one answer per interrupt,
    each naming its ``ref`` (or ``tool``): a resume answers every interrupt of the turn.
    """
    items = await waiting(inbox, snapshot_id, tenant)
    requests = [given] if isinstance(given, AnswerRequest) else list(given)
    if isinstance(given, AnswerRequest) and len(items) > 1:
        raise InvalidArgumentError(
            f"snapshot {snapshot_id} waits on {', '.join(i.label for i in items)}; a resume answers all of them: "
            'send {"answers": [...]} with one answer per interrupt, each naming its ref'
        )
    try:
        if isinstance(given, AnswerRequest):
            out = await _answer_one(inbox, snapshot_id, given, identity, tenant)
        else:
            out = await _answer_all(inbox, snapshot_id, items, requests, identity, tenant)
    except AbortedError as exc:  # the claim refused it, or the turn lost its claim: who won
        raise await answered(inbox, snapshot_id, tenant, exc) from None
    snap = await inbox.store.load(out.snapshot_id, tenant=tenant) if inbox.store and out.snapshot_id else None
    entry = AuditEntry.from_snapshot(snap) if snap is not None else None
    decisions = [{"ref": r.ref, "tool": r.tool, "decision": r.decision} for r in requests]
    return {
        "decision": given.decision if isinstance(given, AnswerRequest) else None,
        "decisions": decisions,
        "snapshot_id": out.snapshot_id,
        "session_id": out.session_id,
        "finish_reason": out.finish_reason,
        "answered": {"by": entry.by, "at": entry.at.isoformat() if entry.at else None} if entry else None,
        "output": output_to_json(out),
    }


async def _answer_one(
    inbox: Inbox, snapshot_id: str, request: AnswerRequest, identity: Any, tenant: str | None
) -> AgentOutput:
    return await inbox.answer(
        snapshot_id,
        request.answer,
        ref=request.ref,
        tool=request.tool,
        identity=identity,
        tenant=tenant,
        token=request.token,
    )


async def _answer_all(
    inbox: Inbox,
    snapshot_id: str,
    items: list[PendingInterrupt],
    requests: list[AnswerRequest],
    identity: Any,
    tenant: str | None,
) -> AgentOutput:
    answers: dict[str, Answer] = {}
    for n, request in enumerate(requests):
        key = request.ref or request.tool
        if key is None:
            raise InvalidArgumentError(f"answers[{n}] must name its interrupt: give its 'ref' (or 'tool')")
        if key in answers:
            raise InvalidArgumentError(f"two answers name {key!r}; give one answer per interrupt")
        answers[key] = request.answer
    known = {i.ref for i in items if i.ref} | {i.tool for i in items}
    unknown = [key for key in answers if key not in known]
    if unknown:
        raise InvalidArgumentError(f"snapshot {snapshot_id} has no interrupt with ref or tool {unknown[0]!r}")
    missing = [i.label for i in items if not {i.ref, i.tool} & set(answers)]
    if missing:
        raise InvalidArgumentError(f"no answer for {', '.join(missing)}: a resume answers every interrupt of the turn")
    tokens = {r.ref: r.token for r in requests if r.ref and r.token}
    return await inbox.answer_all(snapshot_id, answers, identity=identity, tenant=tenant, tokens=tokens)


# the audit trail -------------------------------------------------------------------------------


async def audit(inbox: Inbox, tenant: str | None, *, session_id: str | None, limit: int) -> list[dict[str, Any]]:
    """The audit trail of one session (every resume), or the newest ``limit`` resumes across the store."""
    if session_id is not None:
        entries = await inbox.audit(session_id, tenant=tenant)
        if not entries and inbox.store and not await inbox.store.list(tenant=tenant, session_id=session_id):
            raise SnapshotNotFoundError(f"there is no session {session_id}" + (f" in tenant {tenant!r}" * bool(tenant)))
        return [e.to_json() for e in entries[-limit:]]
    return [e.to_json() for e in await inbox.audit_all(tenant=tenant, limit=limit)]


async def extend(
    inbox: Inbox, snapshot_id: str, body: Mapping[str, Any], *, identity: Any, tenant: str | None
) -> dict[str, Any]:
    """``POST .../extend``: move the deadline (``by`` a duration, or ``until`` a time); the new one."""
    unknown = sorted(set(body) - {"by", "until", "ref", "tool"})
    if unknown:
        raise InvalidArgumentError(f"unknown field {unknown[0]!r}; an extension takes by or until, and ref or tool")
    by, until, ref, tool = (body.get(k) for k in ("by", "until", "ref", "tool"))
    for name, value in (("by", by), ("until", until), ("ref", ref), ("tool", tool)):
        if value is not None and not isinstance(value, str):
            raise InvalidArgumentError(f"{name} is a string, not {type(value).__name__}")
    moved = parse_duration(by, "by") if by is not None else None
    try:
        when = datetime.fromisoformat(until) if until is not None else None
    except ValueError:
        raise InvalidArgumentError(f"until is an ISO 8601 time with its offset, not {until!r}") from None
    if when is not None and when.tzinfo is None:
        raise InvalidArgumentError("until needs its UTC offset (e.g. 2030-01-01T12:00:00+00:00)")
    new = await inbox.extend(snapshot_id, by=moved, until=when, ref=ref, tool=tool, identity=identity, tenant=tenant)
    return {"snapshot_id": snapshot_id, "expires_at": new.isoformat()}
