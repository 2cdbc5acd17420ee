"""Tool middleware: tool approval holds.

:func:`tool_approval` holds every call to a tool that is not on the allow list: the call
becomes an interrupt (a *hold*, in Genkit's format) instead of running. Approve it with
:func:`approve` (a restart carrying ``metadata.resumed.toolApproved: true``), deny it with
:func:`deny` (a respond marked as a denial). Both are thin constructors of a
:class:`~interlock.interrupts.Decision`. Holds are not claimable by a tool's
``interrupted()``: they belong to the middleware (:func:`is_hold` is the one rule).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from .. import metadata as md
from ..errors import Interrupt
from ..interrupts._decisions import Decision
from ..metadata import is_hold as is_hold
from ..parts import ToolRequestPart, ToolResponsePart
from ._context import ToolContext, ToolMiddleware


def tool_approval(allowed: Iterable[str] = ()) -> ToolMiddleware:
    """Hold calls to tools not in ``allowed`` until a person approves them.

    An empty allow list holds every tool. A bare ``resumed: true`` is not an approval:
    only ``toolApproved: true`` (or ``tool_approved: true``) in ``resumed`` is.
    """
    allowed_names = frozenset(allowed)

    async def hold_unless_approved(
        ctx: ToolContext[Any], value: Any, call_next: Callable[[Any], Awaitable[Any]]
    ) -> Any:
        if ctx.tool in allowed_names or md.approval(ctx.resumed) is True:
            return await call_next(value)
        raise Interrupt(md.hold_data(ctx.tool))

    return hold_unless_approved


def approve(part: ToolRequestPart, **payload: Any) -> ToolRequestPart:
    """The restart that approves a held call (``payload`` travels with it in ``metadata.resumed``)."""
    entry = Decision.approve(payload).answer(part)
    assert isinstance(entry, ToolRequestPart)
    return entry


def deny(part: ToolRequestPart, output: object = None) -> ToolResponsePart:
    """The respond that denies a held call: the tool never runs and the model sees ``output``."""
    result = output if output is not None else {"denied": True, "message": f"The call to {part.name} was not approved."}
    entry = Decision.deny(result).answer(part)
    assert isinstance(entry, ToolResponsePart)
    return entry
