"""How a pause is answered: resume plans, decisions, resume tokens and signing.

The names below are loaded on first use, so importing one submodule does not import the others.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._decisions import Decision as Decision
    from ._decisions import DecisionLabel as DecisionLabel
    from ._decisions import Verb as Verb
    from ._decisions import decision_of as decision_of
    from ._plan import PlannedCall as PlannedCall
    from ._plan import Resume as Resume
    from ._plan import ResumePlan as ResumePlan
    from ._plan import check_resume_shape as check_resume_shape
    from ._plan import interrupt_as as interrupt_as
    from ._plan import is_interrupt as is_interrupt
    from ._plan import json_equal as json_equal
    from ._plan import pending_interrupts as pending_interrupts
    from ._plan import plan_resume as plan_resume
    from ._plan import validate_resume as validate_resume
    from ._policy import AnswerPolicy as AnswerPolicy
    from ._replay import pause_nonce as pause_nonce
    from ._replay import spend_pause as spend_pause
    from ._signing import Keyring as Keyring
    from ._tokens import ResumeToken as ResumeToken
    from ._tokens import TokenDecision as TokenDecision
    from ._tokens import TokenSigner as TokenSigner
    from ._tokens import check_tokens as check_tokens
    from ._tokens import id_digest as id_digest
    from ._tokens import input_digest as input_digest
    from ._tokens import mint_tokens as mint_tokens
    from ._tokens import refused as refused
    from ._who import Bound as Bound
    from ._who import any_of as any_of
    from ._who import has_role as has_role
    from ._who import in_group as in_group
    from ._who import is_identity as is_identity
    from ._who import may_decrease as may_decrease
    from ._who import may_increase as may_increase
    from ._who import one_of as one_of
    from ._who import within as within

_WHERE = {
    "AnswerPolicy": "._policy",
    "Bound": "._who",
    "any_of": "._who",
    "has_role": "._who",
    "in_group": "._who",
    "is_identity": "._who",
    "may_decrease": "._who",
    "may_increase": "._who",
    "one_of": "._who",
    "within": "._who",
    "Decision": "._decisions",
    "DecisionLabel": "._decisions",
    "Keyring": "._signing",
    "PlannedCall": "._plan",
    "Resume": "._plan",
    "ResumePlan": "._plan",
    "ResumeToken": "._tokens",
    "TokenDecision": "._tokens",
    "TokenSigner": "._tokens",
    "Verb": "._decisions",
    "check_resume_shape": "._plan",
    "check_tokens": "._tokens",
    "decision_of": "._decisions",
    "id_digest": "._tokens",
    "input_digest": "._tokens",
    "interrupt_as": "._plan",
    "is_interrupt": "._plan",
    "json_equal": "._plan",
    "mint_tokens": "._tokens",
    "pause_nonce": "._replay",
    "pending_interrupts": "._plan",
    "plan_resume": "._plan",
    "refused": "._tokens",
    "spend_pause": "._replay",
    "validate_resume": "._plan",
}

__all__ = [
    "AnswerPolicy",
    "Bound",
    "Decision",
    "DecisionLabel",
    "Keyring",
    "PlannedCall",
    "Resume",
    "ResumePlan",
    "ResumeToken",
    "TokenDecision",
    "TokenSigner",
    "Verb",
    "any_of",
    "check_resume_shape",
    "check_tokens",
    "decision_of",
    "has_role",
    "id_digest",
    "in_group",
    "input_digest",
    "interrupt_as",
    "is_identity",
    "is_interrupt",
    "json_equal",
    "may_decrease",
    "may_increase",
    "mint_tokens",
    "one_of",
    "pause_nonce",
    "pending_interrupts",
    "plan_resume",
    "refused",
    "spend_pause",
    "validate_resume",
    "within",
]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value
