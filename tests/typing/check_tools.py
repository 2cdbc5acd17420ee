# pyright: strict
"""Type-level tests of typed tools, checked by pyright (strict), not run by pytest.

Each ``assert_type`` line fails pyright when an inferred type changes. Each line marked
``# pyright: ignore[...]`` must be an error: with ``reportUnnecessaryTypeIgnoreComment``
on, a wrong call that pyright starts to accept fails the check too.
"""

from __future__ import annotations

from typing import Any, assert_type

from pydantic import BaseModel

from interlock.parts import ToolRequestPart, ToolResponsePart
from interlock.tools._tool import InterruptedCall, Tool, ToolContext, interrupt_tool, tool


class Transfer(BaseModel):
    to: str
    amount: float


class Confirmation(BaseModel):
    approved: bool


class Receipt(BaseModel):
    id: str


@tool
async def transfer(req: Transfer, ctx: ToolContext[Confirmation], confirmation: Confirmation | None) -> Receipt:
    """Resumable, async, with a typed context."""
    if confirmation is None:
        ctx.interrupt(req)
    return Receipt(id=req.to)


@tool
async def transfer_bare_ctx(req: Transfer, ctx: ToolContext, confirmation: Confirmation | None) -> str:  # pyright: ignore[reportMissingTypeArgument, reportUnknownParameterType]
    """Today's README spelling (a bare ToolContext) infers the resume type from the third parameter."""
    return "sent" if confirmation and confirmation.approved else "held"


@tool(name="balance", idempotent=True)
def balance(req: Transfer, ctx: ToolContext[None]) -> float:
    """Sync, with options, no resume payload."""
    return req.amount


@tool
async def ping(req: str) -> int:
    """Input only."""
    return len(req)


@tool
def resume_without_ctx(req: Transfer, confirmation: Confirmation | None) -> Receipt:
    """A resume payload without a context."""
    return Receipt(id="x")


@tool
async def no_input() -> str:
    """No parameters at all."""
    return "ok"


ask = interrupt_tool("ask", input=Transfer, output=Receipt)
ask_untyped = interrupt_tool("ask_untyped")

assert_type(transfer, Tool[Transfer, Receipt, Confirmation])
assert_type(transfer_bare_ctx, Tool[Transfer, str, Confirmation])
assert_type(balance, Tool[Transfer, float, None])
assert_type(ping, Tool[str, int, None])
assert_type(resume_without_ctx, Tool[Transfer, Receipt, Confirmation])
assert_type(no_input, Tool[dict[str, Any], str, None])
assert_type(ask, Tool[Transfer, Receipt, None])
assert_type(ask_untyped, Tool[dict[str, Any], Any, None])


def answer(part: ToolRequestPart) -> list[ToolRequestPart | ToolResponsePart]:
    """Claiming an interrupt keeps the tool's types: input, restart payload, respond output."""
    entries: list[ToolRequestPart | ToolResponsePart] = []
    call = transfer.interrupted(part)
    assert_type(call, InterruptedCall[Transfer, Receipt, Confirmation] | None)
    if call is not None:
        assert_type(call.input, Transfer)
        assert_type(call.input.amount, float)
        entries.append(call.restart(Confirmation(approved=True)))
        entries.append(call.restart())
        entries.append(call.respond(Receipt(id="r1")))
        entries.append(call.restart_with_input(Transfer(to="Bob", amount=1), Confirmation(approved=False)))
        entries.append(call.restart(123))  # pyright: ignore[reportArgumentType]
        entries.append(call.respond("x"))  # pyright: ignore[reportArgumentType]
        entries.append(call.restart_with_input({"to": "Bob"}))  # pyright: ignore[reportArgumentType]
    asked = ask.interrupted(part)
    if asked is not None:
        assert_type(asked.input, Transfer)
        entries.append(asked.respond(Receipt(id="r2")))
        entries.append(asked.respond(42))  # pyright: ignore[reportArgumentType]
    other = balance.interrupted(part)
    if other is not None:
        entries.append(other.respond(1.5))
        entries.append(other.restart(Confirmation(approved=True)))  # pyright: ignore[reportArgumentType]
    return entries


async def run_directly(ctx: ToolContext[Confirmation]) -> None:
    """The context's resume payload is typed by its parameter."""
    assert_type(ctx.resume, Confirmation | None)


@tool
async def ctx_only(ctx: ToolContext[None]) -> str:
    """A context and no input."""
    return ctx.tool


assert_type(ctx_only, Tool[dict[str, Any], str, None])


@tool  # pyright: ignore[reportCallIssue, reportArgumentType, reportUntypedFunctionDecorator]
def too_many(a: int, b: int, c: int, d: int) -> int:
    """More than (input, ctx, resume): refused."""
    return a + b + c + d
