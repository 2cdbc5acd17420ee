"""A plan's restart knows whether it replaces the request's input: found once, as the plan is made."""

from __future__ import annotations

from banking import transfer

from interlock import Message, Resume, ToolRequestPart
from interlock import metadata as md
from interlock.interrupts._plan import PlannedCall, plan_resume

ASKED = {"to": "bob", "amount": 5}
PAUSED = ToolRequestPart(name="transfer", ref="t1", input=ASKED, metadata={md.INTERRUPT: {"to": "bob"}})
HISTORY = [Message.user("pay bob"), Message(role="model", content=[PAUSED])]


def restart(given: dict[str, object], **metadata: object) -> Resume:
    meta = {md.RESUMED: {"approved": True}, **metadata}
    return Resume(restart=[ToolRequestPart(name="transfer", ref="t1", input=given, metadata=meta)])


def test_a_restart_with_the_asked_input_is_planned_as_not_replaced() -> None:
    (call,) = plan_resume(restart({"amount": 5.0, "to": "bob"}), HISTORY, [transfer]).calls
    assert call.input_replaced is False and not call.replaced


def test_a_revised_restart_is_planned_as_replaced() -> None:
    resume = restart({"to": "bob", "amount": 7}, **{md.REPLACED_INPUT: ASKED})
    (call,) = plan_resume(resume, HISTORY, [transfer], allow_replaced_input=True).calls
    assert call.input_replaced is True and call.replaced


def test_a_call_built_without_the_finding_compares_the_inputs_when_read() -> None:
    same = ToolRequestPart(name="transfer", ref="t1", input=dict(ASKED))
    other = ToolRequestPart(name="transfer", ref="t1", input={"to": "eve", "amount": 5})
    assert not PlannedCall(index=1, request=PAUSED, verb="restart", restart=same).replaced
    assert PlannedCall(index=1, request=PAUSED, verb="restart", restart=other).replaced
    assert not PlannedCall(index=1, request=PAUSED, verb="respond").replaced
