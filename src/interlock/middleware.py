"""Tool middleware: tool approval holds.

:func:`tool_approval` holds every call to a tool that is not on the allow list: the call
becomes an interrupt (a *hold*) instead of running. Approve it with :func:`approve` (a
restart carrying ``metadata.resumed.toolApproved``), deny it with a respond. Holds are
not claimable by a tool's ``interrupted()``: they belong to the middleware.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, cast

from .errors import Interrupt
from .parts import Part, ToolRequestPart, ToolResponsePart
from .tools import APPROVAL_KEY, HOLD_KEY, ToolContext, ToolMiddleware

__all__ = ["approve", "deny", "is_hold", "tool_approval"]


def _approved(resumed: Any) -> bool:
    if not isinstance(resumed, dict):
        return False
    r = cast(dict[str, Any], resumed)
    return r.get(APPROVAL_KEY) is True or r.get("tool_approved") is True


def tool_approval(allowed: Iterable[str] = ()) -> ToolMiddleware:
    """Hold calls to tools not in ``allowed`` until a person approves them.

    An empty allow list holds every tool. A bare ``resumed: true`` is not an approval:
    only ``{"toolApproved": true}`` is.
    """
    allowed_names = frozenset(allowed)

    async def hold_unless_approved(
        ctx: ToolContext[Any], value: Any, call_next: Callable[[Any], Awaitable[Any]]
    ) -> Any:
        if ctx.tool in allowed_names or _approved(ctx.resumed):
            return await call_next(value)
        raise Interrupt({"message": f"Tool not in approved list: {ctx.tool}", HOLD_KEY: True})

    return hold_unless_approved


def is_hold(part: Part) -> bool:
    """True when ``part`` is a call paused by :func:`tool_approval` (not by the tool itself)."""
    if not isinstance(part, ToolRequestPart) or not part.is_interrupt:
        return False
    data = part.meta("interrupt")
    if isinstance(data, dict):
        d = cast(dict[str, Any], data)
        return d.get(HOLD_KEY) is True or str(d.get("message", "")).startswith("Tool not in approved list:")
    return False


def approve(part: ToolRequestPart, **payload: Any) -> ToolRequestPart:
    """The restart that approves a held call (``payload`` travels with it in ``metadata.resumed``)."""
    return ToolRequestPart(
        name=part.name, ref=part.ref, input=part.input, metadata={"resumed": {APPROVAL_KEY: True, **payload}}
    )


def deny(part: ToolRequestPart, output: Any = None) -> ToolResponsePart:
    """The respond that denies a held call: the tool never runs and the model sees ``output``."""
    result = output if output is not None else {"denied": True, "message": f"The call to {part.name} was not approved."}
    return ToolResponsePart(name=part.name, ref=part.ref, output=result, metadata={"interruptResponse": True})
