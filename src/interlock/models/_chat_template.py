"""The text format the embedded Qwen model reads and writes.

* :func:`render_prompt` turns interlock messages and tools into the prompt, with the chat template stored in the GGUF
  (Qwen2.5's: tools as JSON lines inside ``<tools>`` in the system turn, calls as ``<tool_call>`` blocks, results
  as ``<tool_response>`` blocks in a user turn).
* :func:`parse_output` finds tool calls in what the model wrote. It is lenient about the wrapper, because the
  0.5B model almost never writes the ``<tool_call>`` tags its template asks for: it writes a fenced ```json block
  or bare JSON. Every call is checked against its tool's JSON Schema (:func:`schema_errors`, by ``jsonschema``); a
  call that names no known tool or fails the schema stays text and is reported in :attr:`Parsed.rejected`.
* :func:`tool_grammar` writes the GBNF grammar for constrained decoding: "a schema-valid call or plain text".
* :class:`TextStream` decides which generated text can be streamed at once and which must wait, because it may be
  the start of a call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from jsonschema import Draft202012Validator, ValidationError

from .._json_object import is_array, is_object
from ..messages import Message
from ..parts import DataPart, TextPart
from ._base import ToolDefinition

TOOL_HINT = (
    "Only call a function when the user asks for an action that the function performs; "
    "otherwise reply to the user in plain text."
)
"""Appended to the system prompt when tools are offered: it keeps small models from calling a tool for small talk."""

RESULT_HINT = "The tool has run; its result is in <tool_response>. Tell the user the outcome in one short sentence."
"""Appended to the system prompt for the answer after a tool result, asked without the tools.

Without it the 0.5B model answered "I'm sorry, but I can't assist with that." to both a successful transfer and a
denied one; with it: "Alice has received $150." / "The user denied approval for this transfer." (greedy)."""

DEFAULT_SYSTEM = "You are a helpful assistant."

# Qwen2.5's template shows the call format with doubled braces inside a string literal; models copy them.
_DOUBLED_EXAMPLE = re.compile(r'\{\{(\\"name\\": <function-name>, \\"arguments\\": <args-json-object>)\}\}')


def render_prompt(
    template: str,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[ToolDefinition] = (),
    *,
    bos_token: str = "",
    eos_token: str = "",
) -> str:
    """Render chat-template ``messages`` (see :func:`chat_messages`) and ``tools`` with a GGUF's Jinja template.

    Renders as Hugging Face transformers does: tools in OpenAI function format, ``tojson`` keeping key order and
    not HTML-escaping, and the generation prompt for the assistant's turn appended.
    """
    from jinja2.ext import loopcontrols  # jinja2 comes with the ``local`` extra
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def tojson(value: object, indent: int | None = None) -> str:
        return json.dumps(value, ensure_ascii=False, indent=indent)

    def raise_exception(message: str) -> None:
        raise ValueError(f"chat template: {message}")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    filters: dict[str, Any] = cast(Any, env).filters
    filters["tojson"] = tojson
    names: dict[str, Any] = cast(Any, env).globals
    names["raise_exception"] = raise_exception
    fixed = _DOUBLED_EXAMPLE.sub(lambda m: "{" + m.group(1) + "}", template)
    openai_tools = [_openai_tool(t) for t in tools] or None
    return env.from_string(fixed).render(
        messages=list(messages),
        tools=openai_tools,
        add_generation_prompt=True,
        bos_token=bos_token,
        eos_token=eos_token,
    )


def _openai_tool(tool: ToolDefinition) -> dict[str, Any]:
    parameters = tool.input_schema or {"type": "object", "properties": {}}
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": parameters},
    }


def chat_messages(messages: Sequence[Message], *, tools: bool, result_hint: bool = False) -> list[dict[str, Any]]:
    """Interlock messages as chat-template messages (``system``/``user``/``assistant``/``tool`` dicts).

    System messages are merged into one leading system message; with ``tools`` it ends with :data:`TOOL_HINT`,
    with ``result_hint`` with :data:`RESULT_HINT`.
    Tool requests become ``tool_calls`` (rendered by the template in the canonical ``<tool_call>`` form, whatever
    wrapper the model used), and each tool response becomes a ``tool`` message with the output as JSON.
    """
    system = [m.text for m in messages if m.role == "system" and m.text]
    out: list[dict[str, Any]] = []
    if system or tools or result_hint:
        hints = ([TOOL_HINT] if tools else []) + ([RESULT_HINT] if result_hint else [])
        out.append({"role": "system", "content": "\n\n".join([*(system or [DEFAULT_SYSTEM]), *hints])})
    for message in messages:
        if message.role == "system":
            continue
        if message.role == "tool" or message.tool_responses:
            out.extend({"role": "tool", "content": _json(r.output)} for r in message.tool_responses)
            continue
        text = "".join(_part_text(p) for p in message.content)
        if message.role == "model":
            calls: list[dict[str, Any]] = [
                {"type": "function", "function": {"name": r.name, "arguments": r.input or {}}}
                for r in message.tool_requests
            ]
            entry: dict[str, Any] = {"role": "assistant", "content": text}
            if calls:
                entry["tool_calls"] = calls
            out.append(entry)
        else:
            out.append({"role": "user", "content": text})
    return out


def _part_text(part: object) -> str:
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, DataPart):
        return _json(part.data)
    return ""


def _json(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A schema-valid call found in the model's output."""

    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Rejected:
    """Something shaped like a call that was kept as text, and why."""

    raw: str
    reason: str


@dataclass(frozen=True, slots=True)
class Parsed:
    """The model's output split into text and calls."""

    text: str
    calls: list[ToolCall] = field(default_factory=list[ToolCall])
    rejected: list[Rejected] = field(default_factory=list[Rejected])


# Where a call may start: the tag, a code fence (with an optional language), or JSON at the start of a line.
_OPENER = re.compile(r"<tool_call>|```[A-Za-z_]*[ \t]*\n?|^[ \t]*(?=[{\[])", re.MULTILINE)
_CLOSER = {"<": re.compile(r"\s*</tool_call>"), "`": re.compile(r"\s*```")}
_DECODER = json.JSONDecoder()


def parse_output(output: str, tools: Sequence[ToolDefinition]) -> Parsed:
    """Split ``output`` into text and tool calls.

    Accepts the three wrappers the model writes: ``<tool_call>{…}</tool_call>``, a fenced ```json block and bare
    JSON, each holding ``{"name": …, "arguments": {…}}`` or a list of such objects (``parameters`` is accepted for
    ``arguments``, and arguments given as a JSON string are decoded). A missing closing tag or fence at the very
    end is tolerated. A call is kept only when its tool exists and its arguments pass the tool's JSON Schema
    (top-level properties the schema does not declare count as errors unless it sets ``additionalProperties``:
    small models echo the schema or invent fields); otherwise its text stays in :attr:`Parsed.text` and the
    reason is added to :attr:`Parsed.rejected`.
    """
    by_name = {t.name: t for t in tools}
    text: list[str] = []
    calls: list[ToolCall] = []
    rejected: list[Rejected] = []
    pos = seen = 0
    for match in _OPENER.finditer(output):
        if match.start() < seen:
            continue
        found = _decode_at(output, match)
        if found is None:
            if match.group().startswith("<"):
                rejected.append(Rejected(output[match.start() :].strip(), "the <tool_call> block is not valid JSON"))
            continue
        value, seen = found
        objects: list[Any] = value if is_array(value) else [value]
        if not objects or not all(_call_shaped(o) for o in objects):
            continue
        problems = [p for o in objects if (p := _check_call(cast(dict[str, Any], o), by_name))]
        if problems:
            rejected.append(Rejected(output[match.start() : seen].strip(), "; ".join(problems)))
            continue
        text.append(output[pos : match.start()])
        calls.extend(_to_call(cast(dict[str, Any], o), by_name) for o in objects)
        pos = seen
    text.append(output[pos:])
    joined = "".join(text)
    return Parsed(joined.strip() if calls else joined, calls, rejected)


def _decode_at(output: str, match: re.Match[str]) -> tuple[Any, int] | None:
    start = match.end()
    while start < len(output) and output[start] in " \t\r\n":
        start += 1
    try:
        value, end = _DECODER.raw_decode(output, start)
    except json.JSONDecodeError:
        return _repair_at(output, start, match)
    closer = _CLOSER.get(match.group()[:1])
    if closer is not None and (m := closer.match(output, end)):
        end = m.end()
    return value, end


def _repair_at(output: str, start: int, match: re.Match[str]) -> tuple[Any, int] | None:
    """Decode a call whose closing brackets are missing at the end of the output (or before its closer).

    The 0.5B model sometimes stops one ``}`` short: ``{"name": "x", "arguments": {"a": 1}``.
    """
    closer = _CLOSER.get(match.group()[:1])
    stop = len(output)
    found = re.search(closer.pattern, output[start:]) if closer is not None else None
    if found is not None:
        stop = start + found.start()
    segment = output[start:stop].rstrip()
    missing: list[str] = []
    in_string = escaped = False
    for ch in segment:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            missing.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not missing or missing.pop() != ch:
                return None
    if in_string or not missing or len(missing) > 3:
        return None
    try:
        value = json.loads(segment + "".join(reversed(missing)))
    except json.JSONDecodeError:
        return None
    end = stop
    if closer is not None and (m2 := closer.match(output, stop)):
        end = m2.end()
    return value, end


def _call_shaped(value: object) -> bool:
    return is_object(value) and isinstance(value.get("name"), str)


def _arguments(call: dict[str, Any]) -> Any:
    args = call.get("arguments", call.get("parameters", {}))
    if isinstance(args, str):
        try:
            return json.loads(args or "{}")
        except json.JSONDecodeError:
            return args
    return args


_SCHEMA_KEYS = frozenset({"type", "properties", "required", "additionalProperties", "title", "description"})


def _tool_arguments(call: dict[str, Any], tool: ToolDefinition) -> Any:
    """The call's arguments; for a tool that takes none, an echoed schema (``{"type": "object", …}``) counts as ``{}``.

    Asked "What is my balance?" with a ``getBalance`` tool whose parameters are ``{"type": "object",
    "properties": {}}``, the 0.5B model wrote those parameters as its arguments.
    """
    args = _arguments(call)
    schema = tool.input_schema or {}
    takes_none = not schema.get("properties") and not schema.get("required")
    if takes_none and is_object(args) and set(args) <= _SCHEMA_KEYS:
        return dict[str, Any]()
    return cast(Any, args)


def _check_call(call: dict[str, Any], tools: Mapping[str, ToolDefinition]) -> str | None:
    name = call["name"]
    tool = tools.get(name)
    if tool is None:
        known = ", ".join(repr(t) for t in tools) or "none"
        return f"no tool named {name!r} (tools: {known})"
    args = _tool_arguments(call, tool)
    if not isinstance(args, dict):
        return f"{name!r}: arguments must be a JSON object, got {json.dumps(args)}"
    schema = tool.input_schema or {}
    if "properties" in schema and "additionalProperties" not in schema:
        # Closed by default for model-written arguments: small models echo the schema or invent fields.
        schema = {**schema, "additionalProperties": False}
    errors = schema_errors(args, schema)
    if errors:
        return f"{name!r}: arguments do not match the tool's schema: {'; '.join(errors)}"
    return None


def _to_call(call: dict[str, Any], tools: Mapping[str, ToolDefinition]) -> ToolCall:
    return ToolCall(call["name"], cast(dict[str, Any], _tool_arguments(call, tools[call["name"]])))


def schema_errors(value: Any, schema: Mapping[str, Any]) -> list[str]:
    """What is wrong with ``value`` under a JSON Schema (draft 2020-12, by ``jsonschema``): empty when it is valid.

    Each error reads ``<path>: <what>``, the path in JSONPath style (``$.tags[0]``), sorted by path.
    """
    validator: Any = Draft202012Validator(dict(schema))  # its iter_errors overloads are partly untyped
    found = cast(Iterable[ValidationError], validator.iter_errors(value))
    errors = sorted(found, key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{_path(e.absolute_path)}: {e.message}" for e in errors]


def _path(parts: Iterable[str | int]) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


GrammarMode = Literal["auto", "required", "text"]


def tool_grammar(tools: Sequence[ToolDefinition], mode: GrammarMode) -> str:
    """A GBNF grammar: ``auto`` = a schema-valid call or plain text, ``required`` = a call, ``text`` = text only.

    A call may use any of the three wrappers the model writes (a grammar that allowed only ``<tool_call>`` made
    the model answer in prose instead of calling), and text may not start like markup or JSON (otherwise the model
    writes its call as "text"). Argument rules come from llama.cpp's JSON-Schema converter; a schema it cannot
    convert falls back to "any JSON object" and the parser's schema check catches the rest.
    """
    from llama_cpp.llama_grammar import SchemaConverter  # the ``local`` extra

    order: dict[str, int] = {}
    converter = cast(Any, SchemaConverter(prop_order=order, allow_fetch=False, dotall=False, raw_pattern=False))
    bodies: list[str] = []
    lines: list[str] = []
    for i, tool in enumerate(tools):
        try:
            schema = converter.resolve_refs(json.loads(json.dumps(tool.input_schema or {})), f"tool{i}")
            args = converter.visit(schema or {"type": "object"}, f"il-args-{i}")
        except Exception:  # the converter asserts on schemas it does not know
            args = converter.visit({"type": "object"}, f"il-args-{i}-any")
        name = _gbnf_literal(json.dumps(tool.name))
        lines.append(
            f'il-body-{i} ::= "{{" il-ws "\\"name\\"" il-ws ":" il-ws {name} il-ws "," il-ws '
            f'"\\"arguments\\"" il-ws ":" il-ws {args} il-ws "}}"'
        )
        bodies.append(f"il-body-{i}")
    root = {"auto": "il-call | il-text", "required": "il-call", "text": "il-text"}[mode]
    if not bodies:
        root = "il-text"
    rules = [f"root ::= {root}"]
    if bodies:
        rules.append(
            'il-call ::= "<tool_call>" il-ws il-body il-ws "</tool_call>"'
            ' | "```json" il-ws il-body il-ws "```" | il-body'
        )
        rules.append(f"il-body ::= {' | '.join(bodies)}")
        rules.extend(lines)
    rules.append(r"il-text ::= [^<{\[`\x00-\x20] [^\x00]*")
    rules.append(r"il-ws ::= [ \t\n]{0,12}")
    return "\n".join(rules) + "\n" + cast(str, converter.format_grammar()) + "\n"


def _gbnf_literal(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


_MARKERS = ("<tool_call>", "```")
_JSON_LINE = re.compile(r"^[ \t]*[{\[]", re.MULTILINE)


class TextStream:
    """Splits generated text into what can be streamed now and what must wait (it may be a call).

    Text is held from the first ``<tool_call>``, code fence, or ``{``/``[`` at the start of a line, and trailing
    whitespace and a trailing partial marker are held until more text comes. :meth:`finish` parses the held text.
    """

    def __init__(self) -> None:
        self.raw = ""
        self.streamed = ""
        self._hold: int | None = None

    def feed(self, piece: str) -> str:
        """Add generated text; return the text that can be shown now (maybe empty)."""
        self.raw += piece
        if self._hold is not None:
            return ""
        start = len(self.raw) - len(self.raw.lstrip())
        found = [i for marker in _MARKERS if (i := self.raw.find(marker, start)) >= 0]
        if self.raw[start : start + 1] in ("{", "["):
            found.append(start)
        elif m := _JSON_LINE.search(self.raw, start):
            found.append(m.start())
        if found:
            self._hold = end = min(found)
        else:
            partial = (n for m in _MARKERS for n in range(1, len(m)) if self.raw.endswith(m[:n]))
            end = len(self.raw) - max(partial, default=0)
        visible = self.raw[start:end].rstrip()
        new = visible[len(self.streamed) :]
        self.streamed = visible
        return new

    def finish(self, tools: Sequence[ToolDefinition]) -> tuple[Parsed, str]:
        """Parse everything; return the parse (text = the whole message text) and the text not yet streamed."""
        hold = self._hold if self._hold is not None else len(self.raw)
        rest = parse_output(self.raw[hold:], tools)
        start = len(self.raw) - len(self.raw.lstrip())
        text = (self.raw[start:hold] + rest.text).strip()
        tail = text[len(self.streamed) :] if text.startswith(self.streamed) else ""
        return Parsed(text, rest.calls, rest.rejected), tail
