"""One MCP elicitation form per pending interrupt, and the inbox answer an elicitation result stands for.

What the form asks for is the answer the tool declared (the inbox's
:func:`~interlock.inbox._options.answer_options`, through the protocol seam):

============================  ===================================  ==========================
the interrupt                 the requested schema                 ``accept`` becomes
============================  ===================================  ==========================
an interrupt-only tool        its output type                      :class:`Respond` (content)
a tool's own interrupt with   its resume type                      :class:`Restart` (content)
a resume type
an approval hold, an in-doubt ``{"approve": boolean, "reason":     :class:`Approve`, or
call, or a tool with no       string}``                            :class:`Reject` with the
resume type                                                        reason
============================  ===================================  ==========================

``decline`` is :class:`Reject` (the inbox's reject: a held call never runs, a tool's own
interrupt is restarted denied); ``cancel`` answers nothing. MCP's requested schemas are flat
objects of primitive properties, so a schema is flattened the way the inbox's page renders
it (:func:`~interlock.http._inbox.forms.fields_for`): strings, numbers, integers, booleans
and enums stay typed; a nested property becomes a string holding JSON; a schema that is not
an object becomes one property ``value``. Reading the content reverses that, and the answer
is then validated by the engine like any other (schema, history, resume token).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitResult

from ..._json_object import is_object
from ...errors import InvalidArgumentError
from ...inbox._answers import Answer, Approve, Reject, Respond, Restart
from ...inbox._items import PendingInterrupt
from .._inbox.forms import FormField, fields_for

_TYPES = {"text": "string", "number": "number", "integer": "integer", "checkbox": "boolean", "select": "string"}
_WHOLE = "value"
_APPROVAL: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {"type": "boolean", "title": "Approve", "description": "yes: the call goes ahead; no: it does not"},
        "reason": {"type": "string", "title": "Reason", "description": "why (the model is told, when you deny)"},
    },
    "required": ["approve"],
}


@dataclass(frozen=True, kw_only=True, slots=True)
class Form:
    """What one interrupt's elicitation asks, and how its content reads back."""

    accept: Literal["respond", "restart", "approve"]
    schema: dict[str, Any]
    fields: tuple[FormField, ...] = ()
    """The inbox's fields the schema was flattened from (``()`` for the approval form)."""

    @property
    def whole(self) -> bool:
        """The answer is not an object: one JSON property ``value`` stands for it."""
        return len(self.fields) == 1 and self.fields[0].kind == "json" and self.fields[0].name == "__json__"


def key_of(item: PendingInterrupt) -> str:
    """The input request's key: the interrupt's ref (its tool's name for a call without one)."""
    return item.ref or item.tool


def form_for(item: PendingInterrupt, options: Mapping[str, Mapping[str, Any]]) -> Form:
    """The form asking for ``item``'s answer, given the answers it takes (``AgentService.options``)."""
    if list(options) == ["respond"]:
        return _typed("respond", options["respond"].get("output_schema"))
    restart = options.get("restart")
    schema = restart.get("payload_schema") if restart is not None else None
    if item.is_hold or item.in_doubt or schema is None:
        return Form(accept="approve", schema=_APPROVAL)
    return _typed("restart", schema)


def _typed(accept: Literal["respond", "restart"], schema: dict[str, Any] | None) -> Form:
    fields = tuple(fields_for(schema))
    form = Form(accept=accept, schema={}, fields=fields)
    if form.whole:
        whole = {"type": "string", "title": "Value (JSON)", "description": "the answer, as JSON text"}
        return Form(
            accept=accept, schema={"type": "object", "properties": {_WHOLE: whole}, "required": [_WHOLE]}, fields=fields
        )
    properties = {f.name: _property(f) for f in fields}
    required = [f.name for f in fields if f.required]
    return Form(accept=accept, schema={"type": "object", "properties": properties, "required": required}, fields=fields)


def _property(f: FormField) -> dict[str, Any]:
    out: dict[str, Any] = {"type": _TYPES.get(f.kind, "string"), "title": f.label}
    description = " ".join(x for x in (f.description, f"({f.hint})" if f.hint else "") if x)
    if f.kind == "json":
        description = " ".join(x for x in (description, "JSON text") if x)
    if description:
        out["description"] = description
    if f.options:
        out["enum"] = list(f.options)
    if f.value is not None and f.kind != "json":
        out["default"] = f.value
    return out


def ask(item: PendingInterrupt, form: Form) -> ElicitRequest:
    """The elicitation asking for ``item``'s answer: what the call is, and what it asks."""
    return ElicitRequest(params=ElicitRequestFormParams(message=message_of(item), requested_schema=form.schema))


def message_of(item: PendingInterrupt) -> str:
    """What the person is asked: the tool, its input, and the interrupt's data."""
    call = f"{item.tool}({_json(item.input)})"
    if item.in_doubt:
        return f"{call} may or may not have taken effect (an attempt never reported back). Run it again?"
    if item.is_hold:
        return f"{call} waits for your approval."
    data: Any = item.data
    asked: Any = (data.get("question") or data.get("message")) if is_object(data) else None
    if isinstance(asked, str) and asked:
        return f"{asked}\n(asked by {call}; details: {_json(data)})"
    return f"{call} asks for an answer" + (f": {_json(data)}" if data not in (None, True) else ".")


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=repr)


def answer_of(item: PendingInterrupt, form: Form, result: ElicitResult) -> Answer | None:
    """The inbox answer an elicitation result stands for (``None``: cancelled, nothing answered)."""
    if result.action == "cancel":
        return None
    if result.action == "decline":
        return Reject()
    content: dict[str, Any] = dict(result.content or {})
    if form.accept == "approve":
        approve = content.get("approve")
        if not isinstance(approve, bool):
            raise InvalidArgumentError(f"the answer to {item.label} needs 'approve': true or false")
        reason = content.get("reason")
        return Approve() if approve else Reject(reason=reason if isinstance(reason, str) and reason else None)
    value = _read(item, form, content)
    return Respond(value) if form.accept == "respond" else Restart(value)


def _read(item: PendingInterrupt, form: Form, content: dict[str, Any]) -> Any:
    if form.whole:
        return _parse(item, _WHOLE, content.get(_WHOLE))
    kinds = {f.name: f.kind for f in form.fields}
    return {k: _parse(item, k, v) if kinds.get(k) == "json" else v for k, v in content.items()}


def _parse(item: PendingInterrupt, name: str, text: object) -> Any:
    if not isinstance(text, str):
        raise InvalidArgumentError(f"the answer to {item.label}: {name!r} must be JSON text, not {text!r}")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidArgumentError(f"the answer to {item.label}: {name!r} is not JSON ({exc})") from None
