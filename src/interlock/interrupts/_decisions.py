"""One decision vocabulary for answering a paused call (a resume's audit record is ``_engine/commit.py``'s).

A paused call is answered by a :class:`Decision`, which becomes one entry of a
:class:`~interlock.Resume`:

===========  ============================================  ====================================
verb         built by                                      resume entry
===========  ============================================  ====================================
respond      ``Decision.respond``, ``InterruptedCall        a tool response (the tool does not
             .respond``, inbox ``Respond``                  run); ``metadata.interruptResponse``
restart      ``Decision.restart``, ``InterruptedCall        a tool request; ``metadata.resumed``
             .restart``/``restart_with_input``              is the payload (``True``: none)
approve      ``Decision.approve``, ``middleware.approve``,  a restart whose ``resumed`` carries
             inbox ``Approve``                              ``toolApproved: true``
deny         ``Decision.deny`` (a respond),                 a respond marked ``{"decision":
             ``middleware.deny``, inbox ``Reject``          "deny"}``, or a restart whose
                                                            ``resumed`` carries ``toolApproved:
                                                            false``
===========  ============================================  ====================================

Approve and deny are *explicit* decisions: only they (and a rule a tool declares with
``@tool(approval=...)``) label an answer ``approve``/``deny`` in the audit trail. An
ordinary respond or restart is recorded verbatim, with no label: the audit never guesses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .. import metadata as md
from .._json_object import is_object
from ..parts import ToolRequestPart, ToolResponsePart

Verb = Literal["respond", "restart"]
DecisionLabel = Literal["approve", "deny"]


class _Keep:
    def __repr__(self) -> str:
        return "KEEP"


_KEEP: Any = _Keep()


@dataclass(frozen=True, kw_only=True, slots=True)
class Decision:
    """One answer to one paused call: respond (supply the output) or restart (run it again).

    Attributes:
        verb: ``"respond"`` or ``"restart"``.
        output: a respond's output (JSON).
        payload: a restart's resume payload (JSON; ``None`` for none).
        input: a restart's revised input (JSON), or the paused request's own input.
        decision: ``"approve"``/``"deny"`` for an explicit decision, else ``None``.
        note: extra notes of a respond, kept in its ``metadata.interruptResponse``.
    """

    verb: Verb
    output: Any = None
    payload: Any = None
    input: Any = _KEEP
    decision: DecisionLabel | None = None
    note: Mapping[str, Any] | None = None

    @classmethod
    def respond(
        cls, output: Any, *, decision: DecisionLabel | None = None, note: Mapping[str, Any] | None = None
    ) -> Decision:
        """Supply the call's output; the tool does not run."""
        return cls(verb="respond", output=output, decision=decision, note=note)

    @classmethod
    def restart(
        cls, payload: object = None, *, input: object = _KEEP, decision: DecisionLabel | None = None
    ) -> Decision:
        """Run the call again with ``payload`` (and ``input``, when revised)."""
        return cls(verb="restart", payload=payload, input=input, decision=decision)

    @classmethod
    def approve(cls, payload: Mapping[str, Any] | None = None) -> Decision:
        """Approve the call: a restart carrying ``toolApproved: true`` (a hold lets it through)."""
        return cls.restart(dict(payload or {}), decision="approve")

    @classmethod
    def deny(cls, output: object = None) -> Decision:
        """Deny the call: a respond (the tool never runs; the model sees ``output``)."""
        return cls.respond(output, decision="deny")

    def answer(self, part: ToolRequestPart) -> ToolRequestPart | ToolResponsePart:
        """The resume entry that carries this decision to the paused request ``part``.

        The interrupt's resume token (``metadata.resumeToken``, :mod:`interlock.interrupts._tokens`),
        when it has one, is copied into the entry.
        """
        token = md.resume_token(part)
        carried: dict[str, Any] = {} if token is None else {md.RESUME_TOKEN: token}
        if self.verb == "respond":
            note: Any = True
            if self.note or self.decision:
                note = {**(self.note or {}), **({md.DECISION: self.decision} if self.decision else {})}
            return ToolResponsePart(
                name=part.name, ref=part.ref, output=self.output, metadata={md.INTERRUPT_RESPONSE: note, **carried}
            )
        meta: dict[str, Any] = {md.RESUMED: self._resumed(), **carried}
        if md.is_in_doubt(
            part
        ):  # names the in-doubt attempt it answers (interlock._engine.effects.check_in_doubt_answers)
            meta[md.INTERRUPT] = part.meta(md.INTERRUPT)
        new_input = part.input
        if self.input is not _KEEP:
            new_input = self.input
            meta[md.REPLACED_INPUT] = part.meta(md.REPLACED_INPUT, part.input)  # the recorded original
        return ToolRequestPart(name=part.name, ref=part.ref, input=new_input, metadata=meta)

    def _resumed(self) -> Any:
        if self.decision is None:
            return True if self.payload is None else self.payload
        base: Any = {} if self.payload is None else self.payload
        if not is_object(base):
            return base  # a scalar payload has no room for the marker; a tool rule may label it
        return {**base, md.APPROVAL: self.decision == "approve"}


def decision_of(entry: ToolRequestPart | ToolResponsePart) -> DecisionLabel | None:
    """The explicit decision a resume entry carries (its markers), or ``None``."""
    if isinstance(entry, ToolRequestPart):
        said = md.approval(entry.meta(md.RESUMED))
        return None if said is None else ("approve" if said else "deny")
    note = entry.meta(md.INTERRUPT_RESPONSE)
    label = note.get(md.DECISION) if is_object(note) else None
    return label if label in ("approve", "deny") else None
