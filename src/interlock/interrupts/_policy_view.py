"""What a page shows of a paused call's answer policy: who may answer, the votes, what the viewer may do.

:func:`answer_view` runs the checks of :mod:`interlock.interrupts._policy` (the same functions a
resume goes through) for each answer the inbox offers, so the page disables exactly what a resume
would refuse. It decides nothing: the resume still checks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._json_object import is_object
from ..errors import PermissionDeniedError
from ._policy import (
    AnswerKind,
    AnswerPolicy,
    asked_under,
    check_extension,
    check_kind,
    check_who,
    policy_for,
    quorum_of,
    recorded,
    votes_on,
)
from ._who import describe

if TYPE_CHECKING:
    from ..parts import ToolRequestPart

INBOX_KINDS: dict[str, AnswerKind] = {
    "approve": "approve",
    "reject": "deny",
    "respond": "respond",
    "restart": "restart",
}
"""The inbox's answers as policy kinds (its ``edit`` is an approval with a revised input)."""


def answer_view(
    policies: Sequence[AnswerPolicy], part: ToolRequestPart, votes: Mapping[str, Any], identity: object
) -> dict[str, Any] | None:
    """A paused call's policy as the inbox shows it (``None``: the call has none).

    ``who`` (the predicate, described), ``requester``, ``quorum``, ``votes`` so far, and
    ``refused``: per answer (``approve``, ``reject``, ``respond``, ``restart``, ``edit``,
    ``extend``) the reason ``identity`` may not give it, or ``None``.
    """
    policy, said = policy_for(policies, part), recorded(part)
    if policy is None and said is None:
        return None
    cast = votes_on(votes, part)
    refused: dict[str, str | None] = {}
    for answer, kind in (*INBOX_KINDS.items(), ("edit", "approve")):
        refused[answer] = _reason(lambda k=kind, a=answer: _may(policy, part, identity, k, cast, edit=a == "edit"))
    refused["extend"] = _reason(lambda: check_extension(policies, part, identity))
    return {
        "name": None if policy is None else policy.name,
        "who": None if policy is None or policy.who is None else describe(policy.who),
        "requester": (said or {}).get("requester"),
        "requester_may_answer": bool(policy and policy.requester_may_answer),
        "quorum": quorum_of(said or {}),
        "votes": [{"by": v.get("by"), "decision": v.get("decision"), "at": v.get("at")} for v in cast],
        "digest": (said or {}).get("digest"),
        "refused": refused,
    }


def _may(
    policy: AnswerPolicy | None,
    part: ToolRequestPart,
    identity: object,
    kind: str,
    cast: Sequence[Mapping[str, Any]],
    *,
    edit: bool,
) -> None:
    found = asked_under(policy, part, identity, kind)
    if found is not None:
        who = check_who(part, found[0], found[1], identity, kind)
        check_kind(found[0], found[1], part, identity, kind, who, cast, edit=edit)


def _reason(check: Callable[[], None]) -> str | None:
    try:
        check()
    except PermissionDeniedError as exc:
        details: dict[str, Any] = exc.details if is_object(exc.details) else {}
        return str(details.get("reason", exc.message))
    return None
