"""What a running tool sees and does: :class:`ToolContext`, and the JSON form of what it returns.

:mod:`interlock.tools._tool` defines tools; this module is the part a tool's body meets at run
time (its context, ``ctx.interrupt``, ``ctx.step``), and the one conversion of tool values
to JSON (:func:`to_json`) that inputs, outputs, interrupt data and payloads all go through.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Generic, NoReturn, Protocol, TypeVar, cast

from pydantic import BaseModel, TypeAdapter
from pydantic_core import PydanticSerializationError

from .. import metadata as md
from .._json import check_json
from .._json_object import new_dict
from ..errors import Interrupt, InvalidArgumentError
from ..interrupts._policy import AnswerPolicy
from ..parts import ToolRequestPart
from ..records._sessions import Session
from ._expiry import OnExpire, check_expires_in

R = TypeVar("R")
T = TypeVar("T")


def to_json(value: Any, where: str = "the value", *, check: bool = True) -> Any:
    """A JSON copy of ``value`` (pydantic models and dataclasses included), checked by :func:`check_json`.

    Raises :class:`~interlock.errors.InvalidArgumentError` for what has no JSON form (NaN,
    a lone surrogate, an unknown type), so it is never stored. ``check=False`` skips that
    pass, for a caller whose next step refuses such values itself (a digest's encoder).
    """
    if value is None or isinstance(value, (str, int, float, bool)):
        converted = value
    elif isinstance(value, BaseModel):
        converted = value.model_dump(mode="json", exclude_none=True)
    else:
        try:
            converted = _ANY.dump_python(value, mode="json")
        except PydanticSerializationError as exc:
            raise InvalidArgumentError(f"{where} has no JSON form: {exc}") from None
    if check:
        check_json(converted, where)
    return converted


_ANY: TypeAdapter[Any] = TypeAdapter(Any)


@dataclass(kw_only=True)
class ToolContext(Generic[R]):
    """What a running tool can see and do.

    Attributes:
        tool: the tool's name.
        request: the tool request part being run.
        resumed: the raw ``metadata.resumed`` value of a restart, else ``None``.
        resume: the typed resume payload of a resumable tool, else ``None``.
        original_input: the input the model originally asked for (differs from the
            request's input only when a restart replaced it).
        session: the current agent session, when the tool runs inside an agent.
        context: the caller's context (identity, tenant, ...).
        reclaimed_from: set when this run resumes an interrupt whose previous resumer
            died mid-turn (the turn whose lapsed claim this one took over). That resumer
            may have run this tool partly.
        idempotency_key: the stable key of this logical call in the effect journal (the
            same on every retry of the call; another for another call or a revised input);
            pass it to the service the tool calls. ``None`` outside a server-managed agent.
        attempt: which run of this call this is (1 for the first; ``0`` without a journal).
    """

    tool: str
    request: ToolRequestPart
    resumed: Any = None
    resume: R | None = None
    original_input: Any = None
    session: Session | None = None
    context: dict[str, Any] = field(default_factory=new_dict)
    reclaimed_from: str | None = None
    idempotency_key: str | None = None
    attempt: int = 0
    steps: StepJournal | None = field(default=None, repr=False)

    async def step(self, name: str, fn: Callable[[], Awaitable[T] | T]) -> T:
        """Run ``fn`` once for this call: its JSON result is journaled, and a retry gets it back without running it.

        Use it for each side effect of a tool that does several (reserve, then charge), so
        a retry after a crash or an interrupt between them never repeats the first.
        """
        if self.steps is None:
            result = fn()
            return cast(T, await result if inspect.isawaitable(result) else result)
        return await self.steps.step(name, fn)

    @property
    def is_resumed(self) -> bool:
        """True when this call is a restart of an interrupted request."""
        return self.resumed is not None

    def interrupt(
        self,
        data: Any = None,
        *,
        expires_in: float | timedelta | None = None,
        on_expire: OnExpire | None = None,
        policy: AnswerPolicy | None = None,
        warn_before: float | timedelta | None = None,
    ) -> NoReturn:
        """Pause the turn; ``data`` (a pydantic model or JSON) goes to whoever answers it.

        ``expires_in`` (seconds or a timedelta) gives this interrupt a deadline and
        ``on_expire`` its policy (:mod:`interlock.tools._expiry`), overriding the tool's defaults;
        ``warn_before`` sends an ``interrupt.expiring`` notification that long before the deadline;
        ``policy`` picks which of the tool's answer policies this interrupt is asked under.
        Raises :class:`~interlock.UsageError` for data that reads as "not paused" on the
        wire (``False``, ``0``, ``""``): no one could answer that turn.
        """
        value = to_json(data, "the interrupt data")
        md.interrupt_value(value)  # refuses falsy data here, where the tool raised it
        raise Interrupt(
            value,
            expires_in=check_expires_in(expires_in),
            on_expire=on_expire,
            policy=policy,
            warn_before=check_expires_in(warn_before),
        )


class StepJournal(Protocol):
    """Where :meth:`ToolContext.step` records sub-step results (the effect journal of a call)."""

    async def step(self, name: str, fn: Callable[[], Awaitable[T] | T]) -> T: ...


Recheck = Callable[[Any, ToolContext[Any]], Any]
"""``recheck(input, ctx) -> str | None`` (sync or async): why an approved call must be asked again, or ``None``."""

Reconcile = Callable[[str], Any]
"""``reconcile(idempotency_key) -> output | None`` (sync or async): did the in-doubt effect happen?"""

ToolMiddleware = Callable[[ToolContext[Any], Any, Callable[[Any], Awaitable[Any]]], Awaitable[Any]]
"""``async def mw(ctx, input, call_next) -> output``: wraps every tool execution, restarts included."""
