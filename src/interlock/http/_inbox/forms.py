"""Answer forms from JSON Schemas: typed fields for the page, and the JSON a posted form stands for.

An object schema (a pydantic model's) becomes one field per property: text, a number,
a whole number, a checkbox, a choice for an ``enum``/``Literal``, and a JSON text box for
anything nested. Any other schema, or none, is one JSON text box. The browser is not the
judge: fields carry the schema's constraints as hints only, a value that does not parse
is sent as typed, and the server validates the answer exactly like any resume, so the
message a person sees is the server's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..._json_object import is_array, is_object
from ...errors import InvalidArgumentError

_WHOLE = "__json__"
_HINTS = (
    ("exclusiveMinimum", "> {}"),
    ("minimum", ">= {}"),
    ("exclusiveMaximum", "< {}"),
    ("maximum", "<= {}"),
    ("minLength", "length >= {}"),
    ("maxLength", "length <= {}"),
    ("pattern", "matches {}"),
)


@dataclass(frozen=True, kw_only=True, slots=True)
class FormField:
    """One input of an answer form."""

    name: str
    label: str
    kind: str  # text | number | integer | checkbox | select | json
    required: bool = False
    value: Any = None
    options: list[str] = field(default_factory=list[str])
    hint: str = ""
    description: str = ""

    @property
    def shown(self) -> str:
        """The value as the input shows it."""
        if self.value is None:
            return ""
        if self.kind == "json":
            return json.dumps(self.value, indent=2)
        return str(self.value).lower() if isinstance(self.value, bool) else str(self.value)


def _resolve(schema: object, root: Mapping[str, Any]) -> dict[str, Any]:
    """The schema behind ``$ref``s and ``X | None``, keeping the outer title, description and default."""
    node: Any = schema
    kept: dict[str, Any] = {}
    for _ in range(20):  # a chain of $refs, bounded
        if not is_object(node):
            return {}
        d = node
        kept = {k: d[k] for k in ("title", "description", "default") if k in d} | kept
        ref = d.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            defs = root.get("$defs")
            node = defs.get(ref.removeprefix("#/$defs/")) if is_object(defs) else None
            continue
        options = d.get("anyOf")
        if is_array(options):
            rest = [o for o in options if o != {"type": "null"}]
            if len(rest) == 1:
                node = rest[0]
                continue
        return d | kept
    return {}


def fields_for(schema: dict[str, Any] | None, value: object = None) -> list[FormField]:
    """The fields of a form for ``schema``, filled with ``value`` (e.g. the input being edited)."""
    top = _resolve(schema, schema or {}) if schema else {}
    props: Any = top.get("properties")
    if top.get("type") != "object" or not is_object(props):
        return [FormField(name=_WHOLE, label="value (JSON)", kind="json", required=True, value=value)]
    values = value if is_object(value) else {}
    listed = top.get("required")
    required = {str(n) for n in listed} if is_array(listed) else set[str]()
    return [
        _field(name, _resolve(prop, schema or {}), name in required, values.get(name)) for name, prop in props.items()
    ]


def _field(name: str, prop: dict[str, Any], required: bool, value: object) -> FormField:
    kind = {"string": "text", "number": "number", "integer": "integer", "boolean": "checkbox"}.get(
        str(prop.get("type")), "json"
    )
    enum: Any = prop.get("enum")
    options = [str(o) for o in enum] if is_array(enum) else []
    if options:
        kind = "select"
    if value is None and "default" in prop:
        value = prop["default"]
    hints = [template.format(prop[key]) for key, template in _HINTS if key in prop]
    return FormField(
        name=name,
        label=str(prop.get("title") or name),
        kind=kind,
        required=required,
        value=value,
        options=options,
        hint=", ".join(hints),
        description=str(prop.get("description") or ""),
    )


def read_form(schema: dict[str, Any] | None, form: Mapping[str, str], prefix: str) -> Any:
    """The JSON value the posted fields ``<prefix>.<name>`` stand for (a JSON box left empty: ``None``)."""
    fields = fields_for(schema)
    if fields[0].name == _WHOLE:
        text = form.get(f"{prefix}.{_WHOLE}", "").strip()
        return _json(text, prefix) if text else None
    out: dict[str, Any] = {}
    for f in fields:
        raw = form.get(f"{prefix}.{f.name}")
        if f.kind == "checkbox":
            out[f.name] = raw is not None and raw not in ("", "false", "off")
        elif raw is not None and raw.strip() != "":
            out[f.name] = _typed(f, raw.strip(), prefix)
    return out


def _typed(f: FormField, raw: str, prefix: str) -> Any:
    if f.kind == "json":
        return _json(raw, f"{prefix}.{f.name}")
    if f.kind in ("number", "integer"):
        try:
            number = float(raw)
        except ValueError:
            return raw  # as typed: the server's validation says what is wrong with it
        return int(number) if number.is_integer() and (f.kind == "integer" or "." not in raw) else number
    return raw


def _json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidArgumentError(f'{where} is not JSON ({exc}); type a JSON value, e.g. {{"key": 1}}') from None
