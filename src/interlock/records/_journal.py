"""The effect journal: a tool's side effect is never silently repeated.

Before a tool call runs, the store records an *intent* for it (a :class:`JournalEntry`
with status ``running``): which call (agent, session, the snapshot the turn continues,
tool, ref, a digest of its input), an attempt number and a stable **idempotency key**
that the tool sees as ``ctx.idempotency_key``. When the tool returns, the same entry
records its output (``done``). When the same call is reached again (a retry after a
later failure, a takeover after a crash, a resume after an abort), the journal decides:

* ``done``: the recorded output is *replayed*; the tool does not run;
* ``interrupted`` or ``failed``: the tool said so itself; it runs again (attempt + 1);
* ``running``: the previous attempt may or may not have had its effect: the call is *in
  doubt*. Unless the tool is ``idempotent=True`` (then it retries with the same key) or
  its ``reconcile(key)`` finds out what happened, the turn pauses with an in-doubt
  interrupt on that call for a person or system to answer: restart it (retry with the
  same key), respond with the output it had (mark it done), or respond with a note
  (skip it).

``ctx.step(name, fn)`` journals a tool's own sub-steps the same way, so a tool that
reserves, then charges, never reserves twice.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeAlias

from .._json_object import json_encoder
from ..errors import ClaimConflictError
from ._evolve import evolver, fast_init
from ._sessions import utcnow

JournalStatus: TypeAlias = Literal["running", "done", "interrupted", "failed"]


_text = json_encoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False)
"""The canonical text every digest is of (key order does not matter), one encoder for them all."""


def digest(value: object) -> str:
    """A stable digest of a JSON value (key order does not matter): :func:`text_digest` of :func:`canonical`.

    Raises ``ValueError`` (NaN or infinity, a cycle, nesting too deep) or ``TypeError`` (a
    value with no JSON form), as :func:`json.dumps` does.
    """
    return text_digest(_text(value))


def canonical(value: object) -> str:
    """The canonical text of a JSON value that :func:`digest` is of (raises as :func:`digest` does).

    Two values have the same text exactly when they have the same digest: types count
    (``1``, ``1.0`` and ``true`` are three texts), key order does not.
    """
    return _text(value)


def text_digest(text: str) -> str:
    """The digest of a :func:`canonical` text."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def call_key(*, agent: str | None, session_id: str, index: int, tool: str, ref: str | None, input_digest: str) -> str:
    """The idempotency key of one logical tool call.

    A call is named by its place in the session (``index``: the position in the history
    of the model message that asked for it), its tool, its ref and its input. So the same
    call, retried (the same turn run again after a failure, a takeover, a restart of the
    paused request), has the same key; another call, or the same call with a revised
    input, has another. Two branches of a session that ask for the same call at the same
    place share it: the second replays the first's outcome. ``input_digest`` is
    :func:`digest` of the input (the entry keeps it too: it is computed once).
    """
    parts = [agent or "", session_id, str(index), tool, ref or "", input_digest]
    return "ik_" + hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:40]


@fast_init
@dataclass(frozen=True, kw_only=True, slots=True)
class JournalEntry:
    """One logical tool call in the journal, with its latest attempt.

    Attributes:
        key: the idempotency key (see :func:`call_key`).
        session_id: the session the call belongs to.
        snapshot_id: the snapshot the calling turn continued (entries are pruned with it).
        attempt: 1 for the first run, bumped by each retry.
        status: ``running`` (intent recorded, no outcome: in doubt if its runner is gone),
            ``done`` (``output`` recorded), ``interrupted`` or ``failed``.
        steps: the recorded results of ``ctx.step`` sub-steps, by name.
        turn_id: the turn that ran the latest attempt.
        attempts: every attempt so far, oldest first: ``{attempt, turn, status, at}``.
    """

    key: str
    session_id: str
    snapshot_id: str
    agent: str | None
    tool: str
    ref: str | None
    input_digest: str
    attempt: int
    status: JournalStatus
    output: Any = None
    steps: dict[str, Any] = field(default_factory=dict[str, Any])
    turn_id: str | None = None
    started_at: datetime = field(default_factory=utcnow)
    finished_at: datetime | None = None
    attempts: tuple[dict[str, Any], ...] = ()

    def evolve(self, **changes: Any) -> JournalEntry:
        """A copy with ``changes`` applied."""
        return _evolve_entry(self, **changes)

    def to_json(self) -> dict[str, Any]:
        """The entry as JSON (how stores keep it)."""
        return {
            "key": self.key,
            "sessionId": self.session_id,
            "snapshotId": self.snapshot_id,
            "agent": self.agent,
            "tool": self.tool,
            "ref": self.ref,
            "inputDigest": self.input_digest,
            "attempt": self.attempt,
            "status": self.status,
            "output": self.output,
            "steps": self.steps,
            "turnId": self.turn_id,
            "startedAt": self.started_at.isoformat(),
            "finishedAt": None if self.finished_at is None else self.finished_at.isoformat(),
            "attempts": list(self.attempts),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JournalEntry:
        """Read what :meth:`to_json` wrote."""
        finished = data.get("finishedAt")
        return cls(
            key=str(data["key"]),
            session_id=str(data["sessionId"]),
            snapshot_id=str(data["snapshotId"]),
            agent=data.get("agent"),
            tool=str(data["tool"]),
            ref=data.get("ref"),
            input_digest=str(data.get("inputDigest", "")),
            attempt=int(data["attempt"]),
            status=data["status"],
            output=data.get("output"),
            steps=dict(data.get("steps") or {}),
            turn_id=data.get("turnId"),
            started_at=datetime.fromisoformat(data["startedAt"]),
            finished_at=None if finished is None else datetime.fromisoformat(finished),
            attempts=tuple(data.get("attempts") or ()),
        )


_evolve_entry = evolver(JournalEntry)


def superseded(entry: JournalEntry, stored: JournalEntry | None, expect: int) -> ClaimConflictError:
    """The refusal of a journal write whose attempt was superseded (another run took the call over)."""
    attempt = 0 if stored is None else stored.attempt
    by = None if stored is None else stored.turn_id
    return ClaimConflictError(
        f"the call {entry.tool}#{entry.ref or ''} (key {entry.key}) is at attempt {attempt} in the journal, not "
        f"{expect}: "
        + (f"turn {by} took it over" if by else "another run took it over")
        + ", and this run's outcome was not recorded",
        winner=by,
    )


@dataclass(frozen=True, slots=True)
class Expecting:
    """A journal update that writes ``entry`` if the stored attempt is still its own, else raises ABORTED.

    The one rule for recording an attempt's outcome with a later write (a turn's commit): if
    another run took the call over meanwhile, its attempt is newer and the outcome is refused.
    Stores may carry it out as one conditional write (``entry.attempt`` as the expected one).
    """

    entry: JournalEntry

    def __call__(self, cur: JournalEntry | None) -> JournalEntry | None:
        if (0 if cur is None else cur.attempt) != self.entry.attempt:
            raise superseded(self.entry, cur, self.entry.attempt)
        return self.entry
