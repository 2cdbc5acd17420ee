"""Deadlines of interrupts: how long an interrupt waits, and what happens when no one answers.

A tool declares a deadline for its interrupts, or one interrupt carries its own::

    @tool(expires_in=3600, on_expire=OnExpire.reject("No one approved the transfer within an hour."))
    async def transfer(req: Transfer, ctx: ToolContext, ok: Approval | None) -> str:
        if ok is None:
            ctx.interrupt(req)                    # or ctx.interrupt(req, expires_in=600)
        ...

The paused tool request records it as ``metadata.deadline`` (``{"expiresAt": ISO 8601,
"onExpire": policy}``), and the turn's commit writes a timer into the store's outbox
(:mod:`interlock.records._outbox`). When the deadline passes, :mod:`interlock.notify._deadlines` applies
the policy exactly once:

==================================  ===================================================
``OnExpire.reject(note)``           respond with ``{"expired": true, "message": note}``
                                    (the tool does not run; the model reads the note);
                                    the audit records a ``deny`` by the deadline
``OnExpire.respond(output)``        respond with ``output`` (checked against the tool's
                                    output schema when the call pauses)
``OnExpire.escalate(group)``        send an ``interrupt.escalated`` webhook to ``group``;
                                    the interrupt keeps waiting for a person
==================================  ===================================================

``warn_before=`` (seconds or a timedelta, on the tool or the interrupt) sends an
``interrupt.expiring`` webhook that long before the deadline, once (``metadata.warned``).
A permitted identity may move a deadline (:meth:`~interlock.inbox.Inbox.extend`; audited).

Without ``on_expire`` a deadline rejects. Holds of tool-approval middleware and in-doubt
pauses take a deadline only from an explicit ``ctx.interrupt(expires_in=...)``, never from
the tool's default.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol

from .. import metadata as md
from .._json_object import is_object
from ..errors import InterlockError, UsageError
from ..records._sessions import utcnow

Policy = Literal["reject", "respond", "escalate"]


@dataclass(frozen=True, kw_only=True, slots=True)
class OnExpire:
    """What happens when an interrupt's deadline passes (build one with the class methods)."""

    policy: Policy
    note: str | None = None
    """``reject``: the message the model reads."""
    output: Any = None
    """``respond``: the output that answers the call."""
    group: str | None = None
    """``escalate``: the webhook group to notify."""

    @classmethod
    def reject(cls, note: str | None = None) -> OnExpire:
        """Answer the call as rejected, with ``note`` for the model; the tool does not run."""
        return cls(policy="reject", note=note)

    @classmethod
    def respond(cls, output: object) -> OnExpire:
        """Answer the call with ``output`` (a default); the tool does not run."""
        return cls(policy="respond", output=output)

    @classmethod
    def escalate(cls, group: str) -> OnExpire:
        """Notify ``group`` (an ``interrupt.escalated`` webhook); the interrupt keeps waiting."""
        if not group:
            raise UsageError(f"an escalation names a non-empty webhook group, not {group!r}")
        return cls(policy="escalate", group=group)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"policy": self.policy}
        if self.policy == "reject" and self.note is not None:
            out["note"] = self.note
        if self.policy != "escalate" and (self.policy == "respond" or self.output is not None):
            out["output"] = self.output
        if self.policy == "escalate":
            out["group"] = self.group
        return out

    @classmethod
    def from_json(cls, raw: object) -> OnExpire:
        """Read :meth:`to_json`'s output; an unreadable policy reads as ``reject`` (the safe default)."""
        r = raw if is_object(raw) else {}
        policy, note, group = r.get("policy"), r.get("note"), r.get("group")
        if policy == "respond":
            return cls.respond(r.get("output"))
        if policy == "escalate" and isinstance(group, str) and group:
            return cls.escalate(group)
        return cls(policy="reject", note=note if isinstance(note, str) else None, output=r.get("output"))


class ExpiringTool(Protocol):
    """What a deadline needs of a tool (a :class:`~interlock.tools.Tool`): its name, defaults and output check."""

    @property
    def name(self) -> str: ...

    @property
    def expires_in(self) -> float | None: ...

    @property
    def on_expire(self) -> OnExpire | None: ...

    @property
    def warn_before(self) -> float | None: ...

    def validate_output(self, output: object) -> Any: ...


def answers_close_at(deadline: object) -> datetime | None:
    """When a paused call with ``metadata.deadline`` ``deadline`` stops taking answers other than a rejection.

    Its ``expiresAt``, unless its policy escalates (an escalated interrupt keeps waiting for a
    person); ``None`` without a readable deadline.
    """
    if not is_object(deadline) or OnExpire.from_json(deadline.get("onExpire")).policy == "escalate":
        return None
    at = deadline.get("expiresAt")
    try:
        return datetime.fromisoformat(at) if isinstance(at, str) else None
    except ValueError:
        return None


def expiry_note(policy: OnExpire, tool: str) -> dict[str, Any]:
    """What the model reads for a call a ``reject`` deadline answered."""
    message = policy.note or f"No one answered the call to {tool} before its deadline; it was not made."
    return {"expired": True, "message": message}


def checked_policy(tool: ExpiringTool, policy: OnExpire) -> OnExpire:
    """``policy`` with the output that will answer the call, checked against the tool's output schema.

    ``respond``: its output. ``reject``: :func:`expiry_note`, or its message alone for a tool
    whose output is a string. Raises :class:`UsageError` (or ``ToolOutputError``) when neither fits.
    """
    if policy.policy == "respond":
        return OnExpire.respond(tool.validate_output(policy.output))
    if policy.policy == "escalate":
        return policy
    note = expiry_note(policy, tool.name)
    for candidate in (note, note["message"]):
        try:
            return OnExpire(policy="reject", note=policy.note, output=tool.validate_output(candidate))
        except InterlockError:
            continue
    raise UsageError(
        f"tool {tool.name!r} cannot be answered with a rejection note (its output schema takes neither "
        "an object nor a string): declare on_expire=OnExpire.respond(<an output it takes>)"
    )


def check_expires_in(expires_in: object) -> float | None:
    """``expires_in`` as seconds (``None``: no deadline); raises :class:`UsageError` for anything else."""
    if expires_in is None:
        return None
    if isinstance(expires_in, timedelta):
        expires_in = expires_in.total_seconds()
    if isinstance(expires_in, bool) or not isinstance(expires_in, (int, float)) or not expires_in > 0:
        raise UsageError(f"expires_in is a positive number of seconds or a timedelta, not {expires_in!r}")
    return float(expires_in)


def deadline_metadata(
    tool: ExpiringTool,
    data: Any,
    *,
    expires_in: float | None,
    on_expire: OnExpire | None,
    warn_before: float | None = None,
    now: datetime | None = None,
) -> dict[str, Any] | None:
    """The ``metadata.deadline`` of an interrupt ``tool`` raised with ``data`` (``None``: no deadline).

    The interrupt's own ``expires_in``/``on_expire`` win; the tool's defaults apply to its
    own interrupts only (not to holds or in-doubt pauses). The answer the policy will give
    is fixed and checked against the tool's output schema here (:func:`checked_policy`).
    ``warnBefore`` (seconds) is there when a warning goes out before the deadline.
    """
    own = expires_in is not None
    seconds = expires_in if own else tool.expires_in
    if seconds is None or (not own and _foreign_pause(tool, data)):
        return None
    policy = checked_policy(tool, on_expire or tool.on_expire or OnExpire.reject())
    at = (now or utcnow()) + timedelta(seconds=seconds)
    out: dict[str, Any] = {"expiresAt": at.isoformat(), "onExpire": policy.to_json()}
    warn = warn_before if warn_before is not None else tool.warn_before
    return out if warn is None else {**out, "warnBefore": warn}


def _foreign_pause(tool: ExpiringTool, data: object) -> bool:
    """A pause the tool itself did not ask for: a middleware hold or an in-doubt call."""
    if not is_object(data):
        return False
    d = data
    return d.get(md.IN_DOUBT) is True or d.get("message") == md.hold_message(tool.name)
