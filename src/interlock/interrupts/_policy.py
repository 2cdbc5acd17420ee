"""Who may answer a paused call: answer policies, and the one check every resume goes through.

A tool declares an :class:`AnswerPolicy` (``@tool(policy=...)``, ``interrupt_tool(...,
policy=...)``; ``ctx.interrupt(..., policy=...)`` picks another of the tool's policies for one
interrupt). When the call pauses, the interrupt records the policy it was asked under
(``metadata.answerPolicy``: its name, digest, quorum and the identity that started the turn).
When a resume answers it, :func:`check_answers` (called by the engine's turn, before anything
is claimed or runs, for every surface alike) refuses with PERMISSION_DENIED and a reason:

==============================  ===============================================================
reason                          when
==============================  ===============================================================
``policy_changed``              the interrupt was asked under another policy (or none)
``requester_cannot_approve``    the identity that started the turn answers its own interrupt
``not_permitted``               the policy's ``who`` refuses the answering identity
``decision_not_allowed``        the answer's kind (approve, deny, respond, restart) is not allowed
``edit_not_allowed``            an edited input changes a field, or beyond a bound, the policy forbids
``already_voted``               a quorum voter votes a second time
==============================  ===============================================================

A quorum (``quorum=2``, or ``quorum=lambda input: 2 if input["amount"] > 10_000 else 1``)
needs that many approvals from distinct permitted identities: the votes before the last are
recorded on the interrupted snapshot (:func:`interlock.records.snapshots.cast_votes`) and the
last one resumes the turn.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

from .. import metadata as md
from .._json_object import is_object, new_dict
from ..errors import PermissionDeniedError, UsageError
from ..records._sessions import utcnow
from ..records.snapshots import Ballot
from ._who import Bound, Predicate, describe, identity_key, same

if TYPE_CHECKING:
    from ..parts import ToolRequestPart, ToolResponsePart
    from ..records._sessions import Snapshot


class PlannedCall(Protocol):
    """What the check reads of a :class:`~interlock.interrupts.PlannedCall` (``_plan`` imports this module)."""

    @property
    def request(self) -> ToolRequestPart: ...
    @property
    def verb(self) -> str: ...
    @property
    def decision(self) -> Literal["approve", "deny"] | None: ...
    @property
    def policy(self) -> AnswerPolicy | None: ...
    @property
    def restart(self) -> ToolRequestPart | None: ...
    @property
    def original_input(self) -> Any: ...
    @property
    def replaced(self) -> bool: ...


class _Resume(Protocol):
    @property
    def respond(self) -> list[ToolResponsePart]: ...
    @property
    def restart(self) -> list[ToolRequestPart]: ...


class ResumePlan(Protocol):
    """What the check reads of a :class:`~interlock.interrupts.ResumePlan`."""

    @property
    def resume(self) -> _Resume: ...
    @property
    def calls(self) -> Sequence[PlannedCall]: ...


Reason = Literal[
    "not_permitted",
    "requester_cannot_approve",
    "already_voted",
    "edit_not_allowed",
    "decision_not_allowed",
    "policy_changed",
]
AnswerKind = Literal["approve", "deny", "respond", "restart"]
ANSWER_KINDS: tuple[AnswerKind, ...] = ("approve", "deny", "respond", "restart")

DEADLINE_IDENTITY = "interlock.deadlines"
"""The identity a passed deadline answers under (:mod:`interlock.notify._deadlines`): its policy is ``on_expire``."""


# the policy ---------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class AnswerPolicy:
    """Who may answer a tool's paused calls, how, and how many must agree.

    Attributes:
        name: names the policy among a tool's policies (``ctx.interrupt(policy=...)`` picks one).
        who: ``who(identity) -> bool``; ``None`` admits every identity (the requester aside).
        requester_may_answer: let the identity that started the turn answer its own interrupt
            (separation of duties is on by default).
        decisions: the kinds of answer allowed: ``approve``, ``deny``, ``respond`` (an output
            with no decision), ``restart`` (a run with no decision).
        edits: the input fields an edit may change, each with its :class:`Bound`
            (``{"amount": may_decrease()}``); any other field must stay as it was. Empty: no edits.
        quorum: how many approvals from distinct permitted identities, or ``fn(input) -> int``
            of the call's original input.
        deny_ends: a permitted identity's deny ends a quorum (else it is recorded and the vote goes on).
    """

    name: str = "default"
    who: Predicate | None = None
    requester_may_answer: bool = False
    decisions: frozenset[AnswerKind] = frozenset(ANSWER_KINDS)
    edits: Mapping[str, Bound] = field(default_factory=new_dict)
    quorum: int | Callable[[Any], int] = 1
    deny_ends: bool = True

    def __post_init__(self) -> None:
        unknown = set(self.decisions) - set(ANSWER_KINDS)
        if unknown:
            raise UsageError(f"AnswerPolicy.decisions are among {ANSWER_KINDS}, not {sorted(unknown)}")
        if isinstance(self.quorum, int) and self.quorum < 1:
            raise UsageError(f"AnswerPolicy.quorum is at least 1, not {self.quorum}")

    @property
    def digest(self) -> str:
        """A digest of what the policy says (names of its functions, not their code)."""
        described = {
            "name": self.name,
            "who": None if self.who is None else describe(self.who),
            "requester": self.requester_may_answer,
            "decisions": sorted(self.decisions),
            "edits": {k: b.describe() for k, b in sorted(self.edits.items())},
            "quorum": self.quorum if isinstance(self.quorum, int) else describe(self.quorum),
            "denyEnds": self.deny_ends,
        }
        return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:16]

    def quorum_for(self, input: object) -> int:
        """The approvals a call with ``input`` needs."""
        if isinstance(self.quorum, int):
            return self.quorum
        k = self.quorum(input)
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise UsageError(f"the quorum of answer policy {self.name!r} gave {k!r}; it gives an int of at least 1")
        return k

    def admits(self, identity: object) -> bool:
        """May ``identity`` answer (the requester rule aside)?"""
        if self.who is None:
            return True
        try:
            return bool(self.who(identity))
        except Exception:  # a predicate that cannot read this identity does not admit it
            return False


def policies_of(declared: AnswerPolicy | Sequence[AnswerPolicy] | None) -> tuple[AnswerPolicy, ...]:
    """A tool's ``policy=`` as a tuple (the first is its default), checked for distinct names."""
    if declared is None:
        return ()
    found = (declared,) if isinstance(declared, AnswerPolicy) else tuple(declared)
    for p in found:
        if not isinstance(p, AnswerPolicy):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise UsageError(f"policy= takes an AnswerPolicy or a list of them, not {p!r}")
    names = [p.name for p in found]
    if len(set(names)) != len(names):
        raise UsageError(f"a tool's answer policies need distinct names, not {names}")
    return found


def pause_record(
    policies: Sequence[AnswerPolicy], chosen: AnswerPolicy | None, input: object, requester: object
) -> dict[str, Any] | None:
    """The ``answerPolicy`` metadata of a paused call (``None`` for a tool without a policy)."""
    policy = chosen or (policies[0] if policies else None)
    if policy is None:
        return None
    if chosen is not None and all(p is not chosen and p != chosen for p in policies):
        raise UsageError(
            f"ctx.interrupt(policy=...) names answer policy {chosen.name!r}, which the tool does not declare; "
            "list it in the tool's policy=[...] so a resume in another process finds it"
        )
    return {
        "name": policy.name,
        "digest": policy.digest,
        "requester": identity_key(requester),
        "quorum": policy.quorum_for(input),
    }


def recorded(part: ToolRequestPart) -> dict[str, Any] | None:
    """The ``answerPolicy`` a paused call records, or ``None``."""
    found = part.meta(md.POLICY)
    return found if is_object(found) else None


def policy_for(policies: Sequence[AnswerPolicy], part: ToolRequestPart) -> AnswerPolicy | None:
    """The tool's policy a paused call was asked under (by its recorded name; the default without a record)."""
    said = recorded(part)
    if said is None:
        return policies[0] if policies else None
    return next((p for p in policies if p.name == said.get("name")), None)


# the check ----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Vote:
    """One quorum vote a resume casts: recorded, and when it reaches the quorum, the resume answers the call."""

    key: str
    part: ToolRequestPart
    by: str
    decision: Literal["approve", "deny"]
    digest: str
    quorum: int

    def ballot(self) -> Ballot:
        """The vote as the store records it (:func:`interlock.records.snapshots.cast_votes`)."""
        row = {"by": self.by, "at": utcnow().isoformat(), "decision": self.decision, "digest": self.digest}
        return Ballot(key=self.key, by=self.by, quorum=self.quorum, row=row)


def call_key(part: ToolRequestPart) -> str:
    """``name#ref``: how votes name the call they are about."""
    return f"{part.name}#{part.ref or ''}"


def answer_kind(call: PlannedCall) -> AnswerKind:
    """What kind of answer a planned call is: its decision, else its verb."""
    if call.decision is not None:
        return call.decision
    return "respond" if call.verb == "respond" else "restart"


def refusal(
    reason: Reason, message: str, part: ToolRequestPart, identity: object, kind: str | None = None
) -> PermissionDeniedError:
    """The PERMISSION_DENIED of a refused answer: ``details`` say why, of what, by whom, when, under which policy."""
    said = recorded(part) or {}
    details = {
        "reason": reason,
        "tool": part.name,
        "ref": part.ref,
        "identity": identity_key(identity),
        "kind": kind,
        "at": utcnow().isoformat(),
        "policy": said.get("digest"),
    }
    return PermissionDeniedError(f"{reason}: {message}", details=details)


def check_answers(
    plan: ResumePlan, identity: object, *, votes: Mapping[str, Any] | None = None, automatic: bool = False
) -> list[Vote]:
    """Refuse a resume any answer of which its policy forbids; the quorum votes it casts instead of answering.

    Raises :class:`~interlock.errors.PermissionDeniedError` (details: ``reason``, ``tool``, ``ref``,
    ``identity``) before anything is claimed or runs. Returns ``[]`` when every answer goes
    through; else the votes to record (then nothing else is answered: a resume that would
    complete some calls and only vote on others is refused).
    """
    votes_cast: list[Vote] = []
    final = 0
    for call in plan.calls:
        if call.verb == "pending":
            continue
        vote = _check_call(call, identity, votes or {}, automatic=automatic)
        if vote is None:
            final += 1
        else:
            votes_cast.append(vote)
    if votes_cast and final:
        raise refusal(
            "decision_not_allowed",
            "this resume casts a quorum vote on one call and answers another; answer them in separate resumes",
            votes_cast[0].part,
            identity,
        )
    return votes_cast


def _check_call(call: PlannedCall, identity: object, votes: Mapping[str, Any], *, automatic: bool) -> Vote | None:
    part, kind = call.request, answer_kind(call)
    if md.surfaced_from(part) is not None:  # a sub-agent's call: its own turn checks the answer it is handed
        return None
    found = asked_under(call.policy, part, identity, kind)
    if found is None:
        return None
    policy, said = found
    if automatic and identity == DEADLINE_IDENTITY:  # a passed deadline's answer: its policy is on_expire
        return None
    who = check_who(part, policy, said, identity, kind)
    check_kind(policy, said, part, identity, kind, who, votes_on(votes, part), edit=call.replaced)
    if call.replaced:
        _check_edit(call, policy, identity)
    quorum = quorum_of(said)
    if quorum == 1 or (kind == "deny" and policy.deny_ends):
        return None
    # every vote is recorded; the store counts them, and the write of the one that reaches the quorum claims
    assert kind in ("approve", "deny")
    return Vote(key=call_key(part), part=part, by=who, decision=kind, digest=policy.digest, quorum=quorum)


def asked_under(
    policy: AnswerPolicy | None, part: ToolRequestPart, identity: object, kind: str
) -> tuple[AnswerPolicy, Mapping[str, Any]] | None:
    """The policy a paused call was asked under and its record (``None``: it has none); refuses a changed one."""
    said = recorded(part)
    if policy is None and said is None:
        return None
    if policy is None or said is None or said.get("digest") != policy.digest:
        raise refusal(
            "policy_changed",
            f"the interrupt of tool {part.name!r} was asked under another answer policy than the tool has now; "
            "it cannot be answered under the new one (ask again: run the turn anew)",
            part,
            identity,
            kind,
        )
    return policy, said


def quorum_of(said: Mapping[str, Any]) -> int:
    """The approvals a paused call needs, as its record says (1 when it says nothing readable)."""
    k = said.get("quorum")
    return k if isinstance(k, int) and not isinstance(k, bool) and k > 0 else 1


def check_kind(
    policy: AnswerPolicy,
    said: Mapping[str, Any],
    part: ToolRequestPart,
    identity: object,
    kind: str,
    who: str,
    cast: Sequence[Mapping[str, Any]],
    *,
    edit: bool,
) -> None:
    """The rules of the answer itself; raises the refusal.

    Its kind allowed, an edit allowed at all, and under a quorum only approve or deny on the
    original input, once per voter.
    """
    if kind not in policy.decisions:
        raise refusal(
            "decision_not_allowed",
            f"answer policy {policy.name!r} of tool {part.name!r} does not allow a {kind} "
            f"(allowed: {', '.join(sorted(policy.decisions))})",
            part,
            identity,
            kind,
        )
    quorum = quorum_of(said)
    if edit and not policy.edits:
        raise refusal("edit_not_allowed", f"answer policy {policy.name!r} allows no edits", part, identity, "edit")
    if quorum == 1:
        return
    if kind not in ("approve", "deny") or edit:
        raise refusal(
            "edit_not_allowed" if edit else "decision_not_allowed",
            f"tool {part.name!r} needs {quorum} approvals; vote with approve or deny on the original input",
            part,
            identity,
            kind,
        )
    if any(v.get("by") == who for v in cast):
        raise refusal(
            "already_voted",
            f"{who!r} has already voted on this call of tool {part.name!r}; it counts once",
            part,
            identity,
            kind,
        )


def check_who(part: ToolRequestPart, policy: AnswerPolicy, said: Mapping[str, Any], identity: object, kind: str) -> str:
    """Separation of duties, then ``who``: the answering identity's name, or the refusal."""
    requester = said.get("requester")
    who = identity_key(identity)
    if not policy.requester_may_answer and requester is not None and who == requester:
        raise refusal(
            "requester_cannot_approve",
            f"{who!r} started the turn that asked for this call of tool {part.name!r} and may not answer it; "
            "another permitted person must",
            part,
            identity,
            kind,
        )
    if who is None or not policy.admits(identity):
        raise refusal(
            "not_permitted",
            f"{who!r} may not answer tool {part.name!r} under answer policy {policy.name!r}; "
            "ask a permitted person (the inbox shows who may answer)",
            part,
            identity,
            kind,
        )
    return who


def check_extension(policies: Sequence[AnswerPolicy], part: ToolRequestPart, identity: object) -> None:
    """May ``identity`` move the deadline of the paused call ``part``? The same people who may answer it.

    Raises :class:`~interlock.errors.PermissionDeniedError` (``policy_changed``,
    ``requester_cannot_approve``, ``not_permitted``); a call without a policy may be extended by anyone.
    """
    found = asked_under(policy_for(policies, part), part, identity, "extend")
    if found is not None:
        check_who(part, found[0], found[1], identity, "extend")


def _check_edit(call: PlannedCall, policy: AnswerPolicy, identity: object) -> None:
    part = call.request
    old, new = call.original_input, call.restart.input if call.restart else None
    if not is_object(old) or not is_object(new):
        changed = ["(the whole input)"]
    else:
        changed = [
            k
            for k in sorted(set(old) | set(new))
            if not (k in old and k in new and same(old[k], new[k]))
            and not (k in policy.edits and k in old and k in new and policy.edits[k].allows(old[k], new[k]))
        ]
    if changed:
        allowed = {k: b.kind for k, b in policy.edits.items()}
        raise refusal(
            "edit_not_allowed",
            f"the edit of tool {part.name!r}'s input changes {', '.join(changed)} beyond what answer policy "
            f"{policy.name!r} allows (editable: {allowed or 'nothing'}); "
            "answer with the original input, or within bounds",
            part,
            identity,
            "edit",
        )


def votes_of(snapshot: Snapshot | None) -> Mapping[str, Any]:
    """The quorum votes recorded on an interrupted snapshot (``metadata.votes``)."""
    found = (snapshot.metadata or {}).get(md.VOTES) if snapshot is not None else None
    return found if is_object(found) else {}


def automatic(plan: ResumePlan) -> bool:
    """True for a passed deadline's answer: every entry a respond its ``on_expire`` policy wrote."""
    entries = plan.resume.respond
    return bool(entries) and not plan.resume.restart and all(md.expired_by(e) is not None for e in entries)


def votes_on(votes: Mapping[str, Any], part: ToolRequestPart) -> list[Mapping[str, Any]]:
    """The votes recorded on a paused call (from a snapshot's ``metadata.votes``)."""
    found: Any = votes.get(call_key(part))
    return [v for v in cast(list[Any], found) if is_object(v)] if isinstance(found, list) else []
