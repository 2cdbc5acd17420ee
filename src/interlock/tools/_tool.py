"""Tools: typed Python functions the model can call, and that can pause a turn.

A tool is defined from a function whose first parameter is the input (a pydantic model,
a TypedDict, a dataclass or any type pydantic understands), optionally followed by a
:class:`ToolContext` and, for a *resumable* tool, a third parameter: the typed resume
payload, ``None`` on the first call and the validated payload when the turn is
restarted::

    @tool
    async def transfer(req: Transfer, ctx: ToolContext, approval: Approval | None) -> Receipt:
        \"\"\"Move money between accounts.\"\"\"
        if approval is None:
            ctx.interrupt(TransferApproval(to=req.to, amount=req.amount))
        ...

:func:`interrupt_tool` declares a tool that never runs: calling it always pauses the turn,
and the caller answers it with :meth:`InterruptedCall.respond`.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, Literal, TypeVar, cast, overload

from pydantic import TypeAdapter

from .. import metadata as md
from ..errors import Interrupt, UsageError
from ..interrupts._decisions import Decision
from ..interrupts._policy import AnswerPolicy, policies_of
from ..models import ToolDefinition
from ..parts import ToolRequestPart, ToolResponsePart
from ._context import Recheck, Reconcile, ToolContext, to_json
from ._context import ToolMiddleware as ToolMiddleware
from ._expiry import OnExpire, check_expires_in, checked_policy
from ._signature import (
    Signature,
    checked_input,
    checked_output,
    checked_resume,
    data_as,
    describe,
    read_signature,
    schema,
)

I = TypeVar("I")  # noqa: E741
O = TypeVar("O")  # noqa: E741
R = TypeVar("R")
T = TypeVar("T")


_PLAIN: tuple[type, ...] = (str, int, float, bool)
"""Declared output types whose exact-typed values pydantic returns (and dumps to JSON) unchanged."""


class Tool(Generic[I, O, R]):
    """A tool the model can call. Build one with :func:`tool` or :func:`interrupt_tool`."""

    def __init__(
        self,
        fn: Callable[..., Any] | None,
        *,
        name: str,
        description: str,
        input_type: Any,
        output_type: Any,
        resume_type: Any = None,
        interrupt_data: Any = None,
        signature: Signature | None = None,
        approval: Callable[[Any], bool] | None = None,
        idempotent: bool = False,
        reconcile: Reconcile | None = None,
        expires_in: float | timedelta | None = None,
        on_expire: OnExpire | None = None,
        lax_answers: bool = False,
        policy: AnswerPolicy | Sequence[AnswerPolicy] | None = None,
        warn_before: float | timedelta | None = None,
        recheck: Recheck | None = None,
    ) -> None:
        self.fn = fn
        self.name = name
        self.description = description
        self.input_type = input_type
        self.output_type = output_type
        self.resume_type = resume_type
        self.interrupt_data = interrupt_data
        self.approval = approval
        """The tool's declared rule: does a typed resume payload approve the call (for the audit)?"""
        self.idempotent = idempotent
        """Safe to run again with the same idempotency key: an in-doubt call is retried, not asked about."""
        self.reconcile = reconcile
        """``reconcile(key) -> output | None``: asked first about an in-doubt call (``None``: it did not happen)."""
        self.expires_in = check_expires_in(expires_in)
        """Seconds the tool's own interrupts wait before ``on_expire`` applies (``None``: no deadline)."""
        if on_expire is not None and not isinstance(on_expire, OnExpire):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise UsageError(f"on_expire is an OnExpire policy (OnExpire.reject/respond/escalate), not {on_expire!r}")
        self.warn_before = check_expires_in(warn_before)
        """Seconds before a deadline that an ``interrupt.expiring`` notification goes out (``None``: none)."""
        self.recheck = recheck
        """``recheck(input, ctx) -> reason | None``, run before a resumed call's body: a reason re-asks it."""
        self.policies = policies_of(policy)
        """Who may answer its paused calls (:class:`~interlock.interrupts.AnswerPolicy`; the first is the default)."""
        self.lax_answers = lax_answers
        """Validate a person's answers (resume payloads, respond outputs) in pydantic's lax mode (default: strict)."""
        self._sig = signature
        self._is_async = fn is not None and inspect.iscoroutinefunction(fn)
        self._input: TypeAdapter[Any] = TypeAdapter(input_type)
        self._output: TypeAdapter[Any] | None = (
            None if output_type in (Any, None, type(None)) else TypeAdapter(output_type)
        )
        self._resume: TypeAdapter[Any] | None = None if resume_type is None else TypeAdapter(resume_type)
        self._resume_schema: dict[str, Any] | None | Literal[False] = False  # built on first use
        self.on_expire = on_expire
        """The policy of that deadline (:class:`~interlock.tools.OnExpire`; default: reject)."""
        if self.expires_in is not None or on_expire is not None:  # the answer a deadline gives must fit
            checked_policy(self, on_expire or OnExpire.reject())
        self.definition = ToolDefinition(
            name=name,
            description=description,
            input_schema=schema(input_type),
            output_schema=schema(output_type),
        )

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"

    @property
    def is_interrupt_only(self) -> bool:
        """True for tools declared with :func:`interrupt_tool`: they never run."""
        return self.fn is None

    @property
    def resume_schema(self) -> dict[str, Any] | None:
        """The JSON Schema of the tool's resume payload (what a restart may carry), or ``None``."""
        if self._resume_schema is False:
            self._resume_schema = schema(self.resume_type)
        return self._resume_schema

    @property
    def is_resumable(self) -> bool:
        """True when the tool takes a typed resume payload."""
        return self._resume is not None

    def validate_input(self, raw: object) -> I:
        """The model's raw input, validated; raises :class:`ToolInputError` naming the field."""
        return cast(I, checked_input(self.name, self._input, self._sig, raw))

    def validate_output(self, output: object) -> Any:
        """An output the tool's own code gave, validated (lax) and converted to JSON; raises :class:`ToolOutputError`.

        Its body's return value, ``reconcile``'s answer, a deadline policy's output.
        """
        if type(output) is self.output_type and self.output_type in _PLAIN:  # validating would return it as is
            return checked_output(self.name, None, output)  # its JSON check alone
        return checked_output(self.name, self._output, output)

    def validate_respond(self, output: object) -> Any:
        """A respond's output (a person's answer), validated and converted to JSON.

        Strict unless the tool was built with ``lax_answers=True``: JSON types as declared,
        unknown keys refused. Raises :class:`ToolOutputError` (INVALID_ARGUMENT) naming the field.
        """
        return checked_output(self.name, self._output, output, lax=self.lax_answers)

    def validate_resume(self, resumed: object) -> R | None:
        """The typed resume payload carried by a restart's ``metadata.resumed``.

        ``None`` means "no payload"; so does a bare ``True``, unless the resume type admits
        ``True`` itself (``bool | None``: then it is the payload). The tool-approval marker
        is not part of the payload. Strict unless the tool was built with ``lax_answers=True``
        (JSON types as declared: ``"yes"``, ``1`` or ``"no"`` is not a bool; unknown keys
        refused). Raises :class:`ToolInputError` (INVALID_ARGUMENT) naming the field.
        """
        payload = checked_resume(self.name, self._resume, self.resume_type, resumed, lax=self.lax_answers)
        return cast("R | None", payload)

    async def invoke(self, value: object, ctx: ToolContext[Any]) -> Any:
        """Run the tool body on a validated input; returns JSON output or raises :class:`Interrupt`."""
        if self.fn is None:
            data = self.interrupt_data(value) if callable(self.interrupt_data) else self.interrupt_data
            value = to_json(data, "the interrupt data")
            md.interrupt_value(value)
            raise Interrupt(value)
        sig = self._sig
        assert sig is not None
        args = sig.args(value, ctx)
        # a synchronous body runs on a worker thread, so the event loop (and the claim's lease) stays live
        result = await self.fn(*args) if self._is_async else await asyncio.to_thread(self.fn, *args)
        return self.validate_output(result)

    def question(self, part: ToolRequestPart) -> Tool[Any, Any, Any] | None:
        """The tool that answers ``part``, a question this tool's call surfaced (``None``: none of its own).

        A call may pause on several questions of its own, each surfaced as an interrupt (as a
        delegation's sub-agent's are, :mod:`interlock._engine.surfacing`) whose schema comes with
        the call, not the tool (an MCP tool's input requests). Its answers are validated by the
        tool this returns before anything is claimed, and the inbox renders its schemas.
        """
        return None

    def interrupted(self, part: object) -> InterruptedCall[I, O, R] | None:
        """Claim an interrupt raised by this tool, typed; ``None`` for any other part.

        Returns ``None`` for another tool's interrupt, for a part that is not a pending
        interrupt, and for a hold placed by tool-approval middleware (:func:`~interlock.is_hold`).
        """
        if not isinstance(part, ToolRequestPart) or part.name != self.name or not part.is_interrupt:
            return None
        if md.is_hold(part):
            return None
        return InterruptedCall(
            tool=self, part=part, input=self.validate_input(part.input), data=part.meta(md.INTERRUPT)
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class InterruptedCall(Generic[I, O, R]):
    """An interrupt claimed by the tool that raised it, with typed input.

    Answer it with :meth:`respond` (supply the output; the tool does not run) or
    :meth:`restart` (run the tool again with a resume payload): thin constructors of a
    :class:`~interlock.interrupts.Decision`, answered to this call.
    """

    tool: Tool[I, O, R]
    part: ToolRequestPart
    input: I
    data: Any
    """The interrupt data (``True`` when the tool gave none)."""

    def data_as(self, tp: type[T]) -> T:
        """The interrupt data validated as ``tp``.

        Raises :class:`~interlock.errors.InvalidArgumentError` naming each field that does not fit.
        """
        return data_as(tp, self.data, self.tool.name)

    def respond(self, output: O, *, metadata: dict[str, Any] | None = None) -> ToolResponsePart:
        """A respond entry: ``output`` (validated against the tool's output schema) answers the call."""
        entry = Decision.respond(self.tool.validate_respond(output), note=metadata).answer(self.part)
        assert isinstance(entry, ToolResponsePart)
        return entry

    def restart(self, payload: R | None = None) -> ToolRequestPart:
        """A restart entry: the tool runs again with the same input and ``payload``."""
        return self._restart(Decision.restart(self._payload(payload)))

    def restart_with_input(self, input: I, payload: R | None = None) -> ToolRequestPart:
        """A restart entry with a revised input; the original is recorded as ``metadata.replacedInput``.

        Agents refuse revised inputs unless they were built with ``allow_replaced_input=True``,
        and then only when ``replacedInput`` is the original history recorded.
        """
        return self._restart(Decision.restart(self._payload(payload), input=to_json(input)))

    def _payload(self, payload: object) -> Any:
        if payload is None:
            return None
        resumed = to_json(payload)
        self.tool.validate_resume(resumed)
        return resumed

    def _restart(self, decision: Decision) -> ToolRequestPart:
        entry = decision.answer(self.part)
        assert isinstance(entry, ToolRequestPart)
        return entry


class ToolDecorator:
    """The type of :func:`tool`: ``@tool`` or ``@tool(name=..., ...)`` on a typed function.

    Its overloads let a type checker infer ``Tool[Input, Output, Resume]`` from the
    function's signature: ``(input, ctx, resume) -> output``, ``(input, ctx)``,
    ``(input, resume)``, ``(input)``, ``(ctx)`` or ``()``, sync or async. Other shapes
    are refused: by the type checker, and at definition time with :class:`UsageError`.
    """

    def __init__(
        self,
        *,
        name: str | None = None,
        description: str | None = None,
        approval: Callable[[Any], bool] | None = None,
        idempotent: bool = False,
        reconcile: Reconcile | None = None,
        expires_in: float | timedelta | None = None,
        on_expire: OnExpire | None = None,
        lax_answers: bool = False,
        policy: AnswerPolicy | Sequence[AnswerPolicy] | None = None,
        warn_before: float | timedelta | None = None,
        recheck: Recheck | None = None,
    ) -> None:
        self._name = name
        self._description = description
        self._approval = approval
        self._idempotent = idempotent
        self._reconcile = reconcile
        self._expires_in = expires_in
        self._on_expire = on_expire
        self._lax_answers = lax_answers
        self._policy = policy
        self._recheck = recheck
        self._warn_before = warn_before

    @overload
    def __call__(
        self,
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        approval: Callable[[Any], bool] | None = None,
        idempotent: bool = False,
        reconcile: Reconcile | None = None,
        expires_in: float | timedelta | None = None,
        on_expire: OnExpire | None = None,
        lax_answers: bool = False,
        policy: AnswerPolicy | Sequence[AnswerPolicy] | None = None,
        warn_before: float | timedelta | None = None,
        recheck: Recheck | None = None,
    ) -> ToolDecorator: ...
    @overload
    def __call__(self, fn: Callable[[I, ToolContext[Any], R | None], Awaitable[O]], /) -> Tool[I, O, R]: ...
    @overload
    def __call__(self, fn: Callable[[I, ToolContext[Any]], Awaitable[O]], /) -> Tool[I, O, None]: ...
    @overload
    def __call__(self, fn: Callable[[I, R | None], Awaitable[O]], /) -> Tool[I, O, R]: ...
    @overload
    def __call__(self, fn: Callable[[ToolContext[Any]], Awaitable[O]], /) -> Tool[dict[str, Any], O, None]: ...
    @overload
    def __call__(self, fn: Callable[[I], Awaitable[O]], /) -> Tool[I, O, None]: ...
    @overload
    def __call__(self, fn: Callable[[], Awaitable[O]], /) -> Tool[dict[str, Any], O, None]: ...
    @overload
    def __call__(self, fn: Callable[[I, ToolContext[Any], R | None], O], /) -> Tool[I, O, R]: ...
    @overload
    def __call__(self, fn: Callable[[I, ToolContext[Any]], O], /) -> Tool[I, O, None]: ...
    @overload
    def __call__(self, fn: Callable[[I, R | None], O], /) -> Tool[I, O, R]: ...
    @overload
    def __call__(self, fn: Callable[[ToolContext[Any]], O], /) -> Tool[dict[str, Any], O, None]: ...
    @overload
    def __call__(self, fn: Callable[[I], O], /) -> Tool[I, O, None]: ...
    @overload
    def __call__(self, fn: Callable[[], O], /) -> Tool[dict[str, Any], O, None]: ...
    def __call__(
        self,
        fn: Callable[..., Any] | None = None,
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        approval: Callable[[Any], bool] | None = None,
        idempotent: bool = False,
        reconcile: Reconcile | None = None,
        expires_in: float | timedelta | None = None,
        on_expire: OnExpire | None = None,
        lax_answers: bool = False,
        policy: AnswerPolicy | Sequence[AnswerPolicy] | None = None,
        warn_before: float | timedelta | None = None,
        recheck: Recheck | None = None,
    ) -> Tool[Any, Any, Any] | ToolDecorator:
        if fn is None:
            return ToolDecorator(
                name=name,
                description=description,
                approval=approval,
                idempotent=idempotent,
                reconcile=reconcile,
                expires_in=expires_in,
                on_expire=on_expire,
                lax_answers=lax_answers,
                policy=policy,
                recheck=recheck,
                warn_before=warn_before,
            )
        # Hints may name classes local to the caller's function (with postponed annotations).
        caller = sys._getframe(1).f_locals  # pyright: ignore[reportPrivateUsage]
        sig = read_signature(fn, dict(caller))
        return Tool(
            fn,
            name=self._name or fn.__name__,
            description=self._description if self._description is not None else describe(fn),
            input_type=sig.input_type,
            output_type=sig.output_type,
            resume_type=sig.resume_type,
            signature=sig,
            approval=self._approval,
            idempotent=self._idempotent,
            reconcile=self._reconcile,
            expires_in=self._expires_in,
            on_expire=self._on_expire,
            lax_answers=self._lax_answers,
            policy=self._policy,
            recheck=self._recheck,
            warn_before=self._warn_before,
        )


tool = ToolDecorator()
"""Define a tool from a typed function, sync or async (usable as ``@tool`` or ``@tool(name=...)``).

Input and output schemas come from the type hints; the description from the docstring's
first paragraph. A third parameter makes the tool resumable; ``approval``
(``lambda payload: payload.approved``) declares which typed payloads approve the call, so
the audit trail can label an ordinary restart ``approve``/``deny``. A type checker infers
``Tool[Input, Output, Resume]`` from the signature, so ``tool.interrupted(part)`` gives a
typed :class:`InterruptedCall`.

Side effects (see :mod:`interlock.records._journal`): in a server-managed agent every call is
journaled under ``ctx.idempotency_key`` and never silently repeated. A call whose earlier
attempt may or may not have taken effect pauses for a person, unless the tool is
``idempotent=True`` (it is retried with the same key) or ``reconcile(key)`` says what
happened (its output, or ``None`` when the effect did not happen).

Deadlines (see :mod:`interlock.tools._expiry`): ``expires_in`` gives the tool's interrupts a
deadline, and ``on_expire`` what happens when it passes (default: reject); ``warn_before`` sends
an ``interrupt.expiring`` notification that long before it.

Who may answer (see :mod:`interlock.interrupts._policy`): ``policy=`` an
:class:`~interlock.interrupts.AnswerPolicy` (or a list; the first is the default) checked on
every resume, whatever surface it comes from. ``recheck(input, ctx) -> reason | None`` (sync or
async) runs when an approved call resumes, before its body, on the world as it is then: a reason
(the balance no longer covers it, the recipient was blocked) re-asks the call (a fresh interrupt,
its ``metadata.reasked`` saying why) instead of running it on an approval given for another situation.

Answers: a person's answers (the resume payload of a restart, the output of a respond) are
validated strictly: JSON types as declared (``"yes"``, ``1`` and ``"no"`` are not booleans)
and unknown keys refused with INVALID_ARGUMENT naming the field, nothing run.
``lax_answers=True`` restores pydantic's lax mode (coercion, unknown keys dropped). The
tool's input, written by the model, is validated lax either way.
"""


@overload
def interrupt_tool(
    name: str,
    *,
    input: type[I],
    output: type[O],
    description: str = "",
    data: Callable[[I], object] | object = None,
    expires_in: float | timedelta | None = None,
    on_expire: OnExpire | None = None,
    lax_answers: bool = False,
    policy: AnswerPolicy | Sequence[AnswerPolicy] | None = None,
    warn_before: float | timedelta | None = None,
) -> Tool[I, O, None]: ...
@overload
def interrupt_tool(
    name: str,
    *,
    input: type[I],
    description: str = "",
    data: Callable[[I], object] | object = None,
    expires_in: float | timedelta | None = None,
    on_expire: OnExpire | None = None,
    lax_answers: bool = False,
    policy: AnswerPolicy | Sequence[AnswerPolicy] | None = None,
    warn_before: float | timedelta | None = None,
) -> Tool[I, Any, None]: ...
@overload
def interrupt_tool(
    name: str,
    *,
    output: type[O],
    description: str = "",
    data: Any = None,
    expires_in: float | timedelta | None = None,
    on_expire: OnExpire | None = None,
    lax_answers: bool = False,
    policy: AnswerPolicy | Sequence[AnswerPolicy] | None = None,
    warn_before: float | timedelta | None = None,
) -> Tool[dict[str, Any], O, None]: ...
@overload
def interrupt_tool(
    name: str,
    *,
    description: str = "",
    data: Any = None,
    expires_in: float | timedelta | None = None,
    on_expire: OnExpire | None = None,
    lax_answers: bool = False,
    policy: AnswerPolicy | Sequence[AnswerPolicy] | None = None,
    warn_before: float | timedelta | None = None,
) -> Tool[dict[str, Any], Any, None]: ...
def interrupt_tool(
    name: str,
    *,
    input: Any = Any,
    output: Any = Any,
    description: str = "",
    data: Any = None,
    expires_in: float | timedelta | None = None,
    on_expire: OnExpire | None = None,
    lax_answers: bool = False,
    policy: AnswerPolicy | Sequence[AnswerPolicy] | None = None,
    warn_before: float | timedelta | None = None,
) -> Tool[Any, Any, None]:
    """Declare a tool that never runs: every call pauses the turn, answered by respond.

    Args:
        name: the tool's name as the model sees it.
        input: the input type (its JSON Schema is shown to the model).
        output: the output type; a respond is validated against it.
        description: what the tool is for, for the model.
        data: the interrupt data: a JSON value, a pydantic model, or ``fn(input) -> data``.
        expires_in: a deadline for every call's interrupt (seconds or a timedelta).
        on_expire: what happens when it passes (:class:`~interlock.tools.OnExpire`; default: reject).
        warn_before: an ``interrupt.expiring`` notification this long before the deadline.
        lax_answers: validate a respond's output in pydantic's lax mode (coercing types,
            dropping unknown keys) instead of strictly (JSON types as declared, unknown keys refused).
        policy: who may answer (:class:`~interlock.interrupts.AnswerPolicy`, or a list: the first is the default).
    """
    return Tool(
        None,
        name=name,
        description=description,
        input_type=input,
        output_type=output,
        interrupt_data=data,
        expires_in=expires_in,
        on_expire=on_expire,
        lax_answers=lax_answers,
        policy=policy,
        warn_before=warn_before,
    )
