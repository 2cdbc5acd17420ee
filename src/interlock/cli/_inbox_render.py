"""What ``interlock inbox`` and ``interlock sessions`` print: items, journal entries and audit entries as text or JSON.

:mod:`interlock.cli._inbox` parses the arguments and asks the inbox or the store; the functions here print
the answer, as aligned tables and indented JSON for people or as JSON (``--json``) for scripts.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from datetime import datetime, timedelta
from typing import Any

from .._engine.io import AgentOutput
from .._json_object import is_object
from ..inbox._inbox import AuditAnswer, AuditEntry, PendingInterrupt
from ..metadata import INTERRUPT
from ..records._journal import JournalEntry
from ..records._sessions import utcnow
from ..stores import SnapshotInfo

# inbox ---------------------------------------------------------------------------------------


def listing(items: list[PendingInterrupt], *, as_json: bool) -> None:
    """``inbox list``: the pending interrupts, one row each."""
    if as_json:
        print_json([i.to_json() for i in items])
    elif not items:
        print("no pending interrupts")
    else:
        rows = [
            [i.snapshot_id, _age(i.age), " > ".join(i.agent_path) or i.agent or "-", i.label, _summary(i)]
            for i in items
        ]
        _table(["SNAPSHOT", "AGE", "AGENT", "TOOL", "DATA"], rows)


def snapshot(items: list[PendingInterrupt], journal: list[JournalEntry | None], *, as_json: bool) -> None:
    """``inbox show``: the interrupts one snapshot waits on, each with its journal entry (if any)."""
    if as_json:
        print_json([i.to_json() | {"journal": e and e.to_json()} for i, e in zip(items, journal, strict=True)])
        return
    first = items[0]
    print(f"snapshot  {first.snapshot_id}\nsession   {first.session_id}\nagent     {first.agent or '-'}")
    print(f"waiting   {_age(first.age)} (since {first.created_at.isoformat(timespec='seconds')})")
    for item, entry in zip(items, journal, strict=True):
        print(f"\n{item.label}: {_kind(item)}")
        print(f"  input  {_indent(item.input)}")
        if item.in_doubt:
            if entry is None:
                print(f"  key    {item.idempotency_key or '-'}")
            print("  answer approve: run it again (same key) | respond --output: it did happen | reject: skip it")
        elif not item.is_hold:
            print(f"  data   {_indent(item.data)}")
        if entry is not None:
            _attempts(entry)


def _kind(item: PendingInterrupt) -> str:
    if item.in_doubt:
        tried = f"attempt {item.attempts}" if item.attempts else "an attempt"
        return f"IN DOUBT: {tried} started and never reported back; its effect is unknown"
    return "held for approval by tool_approval" if item.is_hold else "paused by the tool"


def _attempts(entry: JournalEntry) -> None:
    """A call's attempt history, from its journal entry."""
    print(f"  journal  {entry.key}: {entry.status}, attempt {entry.attempt}")
    rows = [
        [
            str(a.get("attempt", "?")),
            str(a.get("turn") or "-"),
            str(a.get("status", "?")),
            _when(a.get("at")),
            _when(a.get("finished")),
        ]
        for a in entry.attempts
    ]
    if rows:
        _table(["ATTEMPT", "TURN", "STATUS", "STARTED", "FINISHED"], rows, indent="    ")
    if entry.steps:
        print(f"    steps done: {', '.join(entry.steps)}")


_DONE = {"approve": "approved", "reject": "rejected", "respond": "answered"}


def report(args: argparse.Namespace, action: str, answered: list[str], identity: object, out: AgentOutput) -> None:
    """``inbox approve|reject|respond``: what was answered, and where the turn went next."""
    pending = [{"tool": p.name, "ref": p.ref, "data": p.meta(INTERRUPT)} for p in out.interrupts]
    if args.json:
        print_json(
            {"decision": action, "answered": answered, "by": identity, "snapshot_id": out.snapshot_id}
            | {"session_id": out.session_id, "finish_reason": out.finish_reason, "text": out.text}
            | {"interrupts": pending}
        )
        return
    by = f" as {identity}" if identity is not None else ""
    print(f"{_DONE[action]} {', '.join(answered)} of snapshot {args.snapshot_id}{by}")
    if pending:
        print(f"the turn paused again in snapshot {out.snapshot_id}: interlock inbox show {out.snapshot_id}")
    else:
        print(
            f"the turn finished ({out.finish_reason}) in snapshot {out.snapshot_id}"
            + (f": {out.text}" * bool(out.text))
        )


# sessions ------------------------------------------------------------------------------------


def _info_json(info: SnapshotInfo) -> dict[str, Any]:
    return asdict(info) | {
        "created_at": info.created_at.isoformat(),
        "updated_at": info.updated_at.isoformat() if info.updated_at else None,
    }


def _state(info: SnapshotInfo) -> str:
    return (info.finish_reason or "completed") if info.status == "completed" else info.status


def sessions(rows: list[tuple[SnapshotInfo, int]], *, as_json: bool) -> None:
    """``sessions list``: each session's latest snapshot and how many it has."""
    if as_json:
        print_json([{"session_id": s.session_id, "snapshots": n, "latest": _info_json(s)} for s, n in rows])
    elif not rows:
        print("no sessions")
    else:
        table = [
            [s.session_id, s.agent or "-", str(n), s.snapshot_id, _state(s), _age(utcnow() - s.created_at)]
            for s, n in rows
        ]
        _table(["SESSION", "AGENT", "SNAPSHOTS", "LATEST", "STATE", "AGE"], table)


def _verdict(answer: AuditAnswer) -> str:
    """What an audit row says was decided: an explicit decision, else just the verb (a quorum vote says so)."""
    if answer.kind == "vote":
        return f"voted {answer.decision or '?'} on"
    if answer.kind == "extend":
        moved: Any = answer.output
        return f"extended the deadline (to {moved.get('to') if is_object(moved) else '?'}) of"
    if answer.decision is not None:
        return "approved" if answer.decision == "approve" else "rejected"
    return "restarted" if answer.kind == "restart" else "answered"


def _answered(answer: AuditAnswer) -> str:
    """One answer of an audit row: what was decided, of which call, under which answer policy."""
    return f"{_verdict(answer)} {answer.label}" + (f" (policy {answer.policy})" if answer.policy else "")


def session(session_id: str, infos: list[SnapshotInfo], audit: list[AuditEntry], *, as_json: bool) -> None:
    """``sessions show``: a session's snapshots, oldest first, and who answered their interrupts."""
    if as_json:
        print_json(
            {"session_id": session_id, "snapshots": [_info_json(i) for i in infos]}
            | {"audit": [e.to_json() for e in audit]}
        )
        return
    answers = {
        e.snapshot_id: f"{e.by if e.by is not None else '?'}: " + ", ".join(_answered(a) for a in e.restart + e.respond)
        for e in audit
    }
    rows = [
        [
            i.snapshot_id,
            i.parent_id or "-",
            _age(utcnow() - i.created_at),
            _state(i),
            i.agent or "-",
            answers.get(i.snapshot_id, ""),
        ]
        for i in infos
    ]
    _table(["SNAPSHOT", "PARENT", "AGE", "STATE", "AGENT", "RESUMED BY"], rows)


# output --------------------------------------------------------------------------------------


def print_json(value: object) -> None:
    """``value`` as indented JSON on stdout (what ``--json`` prints)."""
    print(json.dumps(value, indent=2, default=str))


def _table(headers: list[str], rows: list[list[str]], *, indent: str = "") -> None:
    widths = [max(len(h), *(len(r[c]) for r in rows)) for c, h in enumerate(headers)]
    for row in [headers, *rows]:
        print(indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def _when(value: object) -> str:
    """An ISO 8601 time of the journal, to the second (``-`` for none)."""
    if not isinstance(value, str):
        return "-"
    try:
        return datetime.fromisoformat(value).isoformat(timespec="seconds")
    except ValueError:
        return value


def _age(age: timedelta) -> str:
    seconds = max(0, int(age.total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _compact(value: object, limit: int = 60) -> str:
    text = json.dumps(value, separators=(",", ":"), default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _summary(item: PendingInterrupt) -> str:
    if item.in_doubt:
        return f"IN DOUBT (attempt {item.attempts or '?'}): " + _compact(item.input)
    if item.is_hold:
        return "held: " + _compact(item.input)
    return _compact(item.input if item.data is True else item.data)


def _indent(value: object) -> str:
    return json.dumps(value, indent=2, default=str).replace("\n", "\n         ")
