"""A tool's types: read from its function's signature, shown as JSON Schemas, and checked.

:func:`read_signature` reads what a tool function takes (input, :class:`~interlock.tools.ToolContext`,
resume payload) and returns; :func:`schema` is the JSON Schema of a type; :func:`checked_input`,
:func:`checked_output` and :func:`checked_resume` are the validations behind
:class:`~interlock.tools.Tool`'s ``validate_input``, ``validate_output`` and ``validate_resume``,
each failure a typed error naming the field (:func:`validation_message`).

A person's answers (resume payloads, respond outputs) are validated *strictly* unless the
tool opts into lax validation (:func:`validated`): JSON types as declared (a bool is a JSON
``true``/``false``, never ``"yes"`` or ``1``; an int a JSON integer; a datetime an ISO
string) and unknown keys refused, in every model, TypedDict and dataclass of the type. A
tool's input (written by the model) and its own output (written by its code) stay lax.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError
from pydantic_core import to_json as json_bytes

from .. import metadata as md
from .._json import check_json
from ..errors import InvalidArgumentError, ToolInputError, ToolOutputError, UsageError
from ._context import ToolContext, to_json

T = TypeVar("T")

_STRICT_HINT = (
    " (answers are checked strictly: JSON types as declared, unknown keys refused;"
    " a tool built with lax_answers=True coerces them)"
)


def validation_message(tool: str, what: str, exc: ValidationError, *, strict: bool = False) -> str:
    """The message of a failed validation of ``what`` for ``tool``: each problem with its field."""
    problems: list[str] = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "(root)"
        problems.append(f"field {loc!r}: {err['msg']}")
    return f"{what} for tool {tool!r} is invalid: " + "; ".join(problems) + (_STRICT_HINT if strict else "")


def validated(adapter: TypeAdapter[Any], value: object, *, lax: bool) -> Any:
    """A person's answer ``value`` (JSON) validated by ``adapter``: strictly, unless ``lax``.

    Strict is pydantic's strict mode on the value's JSON text (so a datetime is an ISO
    string, a bool only ``true``/``false``), with ``extra="forbid"`` for every model,
    TypedDict and dataclass in the type (overriding their own ``extra`` setting). The same
    adapter serves both modes: nothing is built per call.
    """
    if lax:
        return adapter.validate_python(value)
    return adapter.validate_json(json_bytes(value), strict=True, extra="forbid")


def data_as(tp: type[T], data: object, tool: str) -> T:
    """Interrupt data of ``tool`` validated as ``tp``; the one reader every ``data_as`` uses.

    Raises :class:`~interlock.errors.InvalidArgumentError` naming each field that does not fit.
    """
    try:
        return TypeAdapter(tp).validate_python(data)
    except ValidationError as exc:
        message = validation_message(tool, "the interrupt data", exc)
        raise InvalidArgumentError(message, details=exc.errors(include_url=False)) from None


@dataclass(frozen=True, kw_only=True, slots=True)
class Signature:
    """What a tool function takes and returns, read from its type hints."""

    input_type: Any
    output_type: Any
    resume_type: Any
    takes_input: bool
    takes_ctx: bool
    takes_resume: bool

    def args(self, value: object, ctx: ToolContext[Any]) -> list[Any]:
        """The arguments a call passes the function: the input, the context, the resume payload (those it takes)."""
        args: list[Any] = []
        if self.takes_input:
            args.append(value)
        if self.takes_ctx:
            args.append(ctx)
        if self.takes_resume:
            args.append(ctx.resume)
        return args


def _strip_optional(tp: object) -> Any:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _is_ctx(tp: object) -> bool:
    return tp is ToolContext or typing.get_origin(tp) is ToolContext


def read_signature(fn: Callable[..., Any], localns: dict[str, Any] | None = None) -> Signature:
    """The signature of a tool function: ``(input, ctx, resume)`` at most; raises :class:`UsageError`."""
    hints = typing.get_type_hints(fn, localns=localns)
    params = [
        p for p in inspect.signature(fn).parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    plain = [p for p in params if not _is_ctx(hints.get(p.name))]
    takes_ctx = len(plain) != len(params)
    if len(plain) > 2:
        raise UsageError(f"tool {fn.__name__!r} takes (input, ctx, resume) at most; got {len(params)} parameters")
    input_type = hints.get(plain[0].name, Any) if plain else dict[str, Any]
    resume_type = _strip_optional(hints.get(plain[1].name, Any)) if len(plain) > 1 else None
    return Signature(
        input_type=input_type,
        output_type=hints.get("return", Any),
        resume_type=resume_type,
        takes_input=bool(plain),
        takes_ctx=takes_ctx,
        takes_resume=len(plain) > 1,
    )


def schema(tp: Any) -> dict[str, Any] | None:
    """The JSON Schema of ``tp`` (``None`` for ``Any`` and ``None``)."""
    if tp is Any or tp is None or tp is type(None):
        return None
    return TypeAdapter(tp).json_schema()


def describe(fn: Callable[..., Any]) -> str:
    """A tool's description: its function's docstring's first paragraph, on one line."""
    return inspect.cleandoc(fn.__doc__ or "").split("\n\n")[0].replace("\n", " ")


def checked_input(name: str, adapter: TypeAdapter[Any], sig: Signature | None, raw: object) -> Any:
    """The model's raw input for tool ``name``, validated; raises :class:`ToolInputError` naming the field."""
    if raw is None and not (sig and sig.takes_input):
        raw = {}
    try:
        return adapter.validate_python(raw)
    except ValidationError as exc:
        raise ToolInputError(
            validation_message(name, "input", exc), tool=name, details=exc.errors(include_url=False)
        ) from None


def checked_output(name: str, adapter: TypeAdapter[Any] | None, output: object, *, lax: bool = True) -> Any:
    """An output for tool ``name``, validated (:func:`validated`) and converted to JSON.

    Raises :class:`ToolOutputError` naming the field.
    """
    where = f"the output of tool {name!r}"
    try:
        if adapter is None:
            return to_json(output, where)
        value = validated(adapter, to_json(output, where), lax=lax)
        dumped = adapter.dump_python(value, mode="json", exclude_none=True)
        check_json(dumped, where)
        return dumped
    except ValidationError as exc:
        raise ToolOutputError(
            validation_message(name, "output", exc, strict=not lax), tool=name, details=exc.errors(include_url=False)
        ) from None
    except InvalidArgumentError as exc:  # not a JSON value
        raise ToolOutputError(exc.message, tool=name) from None


def checked_resume(
    name: str, adapter: TypeAdapter[Any] | None, resume_type: Any, resumed: object, *, lax: bool = False
) -> Any:
    """The typed resume payload of tool ``name`` (see :meth:`~interlock.tools.Tool.validate_resume`)."""
    resumed = md.without_approval(resumed)
    if adapter is None or resumed is None:
        return None
    if resumed is True:
        if resume_type in (Any, object):
            return None
        try:
            return adapter.validate_python(True, strict=True)
        except ValidationError:
            return None
    try:
        return validated(adapter, resumed, lax=lax)
    except ValidationError as exc:
        raise ToolInputError(
            validation_message(name, "resume payload", exc, strict=not lax),
            tool=name,
            details=exc.errors(include_url=False),
        ) from None
