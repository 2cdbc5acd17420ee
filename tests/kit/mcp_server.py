"""An MCP server built with the official SDK (PyPI ``mcp``): the third party interlock's MCP client talks to.

Run it as ``python -m uvicorn mcp_server:app --port 0`` with ``MCP_RUNS`` naming an append-only
file (one line per completed run of ``book`` or ``pay``) and, optionally, ``MCP_HOLD`` naming a
file: while it exists, a retry that carries answers waits before it completes (so a test can kill
the client mid-retry); each such retry appends a line to ``MCP_HOLD.reached`` first.

Tools (revision 2026-07-28, multi round-trip requests):

* ``book(city, nights)``: returns an :class:`~mcp_types.InputRequiredResult` asking two questions
  (``room``: a form with an enum and a boolean; ``payment``: a form with a string and an integer),
  with a ``requestState``; the retry carrying both answers completes, a declined one ends with
  "declined". The request state is checked to be the one this call was given.
* ``pay(amount)``: asks one question (``card``: the payment form); the retry carrying it completes
  (a line ``paid AMOUNT CARD``), a declined one ends with "declined".
* ``buy(item)``: the SDK's own way to ask (a ``Resolve(Elicit)`` parameter; the SDK seals what it
  asked into the ``requestState``): asks ``Confirm`` (``ok``, ``note``), completes with a line
  ``bought ITEM OK``.
* ``echo(text)``: no questions; returns the text.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
from typing import Annotated, Any

from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve
from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitResult, InputRequiredResult
from pydantic import BaseModel

server = MCPServer("bookings")

ROOM = {
    "type": "object",
    "properties": {
        "kind": {"type": "string", "enum": ["single", "double"], "description": "The room"},
        "breakfast": {"type": "boolean", "description": "Breakfast included"},
    },
    "required": ["kind", "breakfast"],
}
PAYMENT = {
    "type": "object",
    "properties": {
        "card": {"type": "string", "description": "The card's last four digits", "minLength": 4, "maxLength": 4},
        "installments": {"type": "integer", "minimum": 1, "maximum": 3},
    },
    "required": ["card"],
}


def _ask(city: str, nights: int) -> InputRequiredResult:
    room = ElicitRequestFormParams(message=f"Which room in {city}?", requested_schema=ROOM)
    payment = ElicitRequestFormParams(message=f"How do you pay {nights} nights?", requested_schema=PAYMENT)
    return InputRequiredResult(
        input_requests={"room": ElicitRequest(params=room), "payment": ElicitRequest(params=payment)},
        request_state=f"state:{city}:{nights}",
    )


async def _hold() -> None:
    hold = os.environ.get("MCP_HOLD")
    if not hold:
        return
    path = pathlib.Path(hold)
    with open(f"{hold}.reached", "a", encoding="utf-8") as reached:  # one line per retry that got here
        reached.write("retry\n")
    while path.exists():
        await asyncio.sleep(0.02)


def _record(line: str) -> None:
    with open(os.environ["MCP_RUNS"], "a", encoding="utf-8") as runs:
        runs.write(line + "\n")


@server.tool(description="Book a hotel; asks which room and how to pay.")
async def book(city: str, nights: int, ctx: Context) -> InputRequiredResult | str:
    answers = ctx.input_responses
    if not answers:
        return _ask(city, nights)
    if ctx.request_state != f"state:{city}:{nights}":
        raise ValueError("requestState is not this call's")
    results: dict[str, Any] = {k: v for k, v in answers.items() if isinstance(v, ElicitResult)}
    if set(results) != {"room", "payment"}:
        return _ask(city, nights)
    await _hold()
    if any(r.action != "accept" for r in results.values()):
        _record(f"declined {city}")
        return f"declined: {', '.join(k for k, r in sorted(results.items()) if r.action != 'accept')}"
    room: dict[str, Any] = results["room"].content or {}
    payment: dict[str, Any] = results["payment"].content or {}
    _record(f"booked {city} {room.get('kind')} {payment.get('card')}")
    return f"booked {nights} nights in {city}: {room.get('kind')} room, card {payment.get('card')}"


@server.tool(description="Pay an amount; asks which card.")
async def pay(amount: int, ctx: Context) -> InputRequiredResult | str:
    answer = (ctx.input_responses or {}).get("card")
    if not isinstance(answer, ElicitResult):
        card = ElicitRequestFormParams(message=f"Which card pays {amount}?", requested_schema=PAYMENT)
        return InputRequiredResult(input_requests={"card": ElicitRequest(params=card)}, request_state=f"pay:{amount}")
    if ctx.request_state != f"pay:{amount}":
        raise ValueError("requestState is not this call's")
    await _hold()
    if answer.action != "accept":
        _record(f"declined pay {amount}")
        return "declined"
    content: dict[str, Any] = answer.content or {}
    _record(f"paid {amount} {content.get('card')}")
    return f"paid {amount} with card {content.get('card')}"


class Confirm(BaseModel):
    ok: bool
    note: str = ""


async def confirm(item: str) -> Elicit[Confirm]:
    return Elicit(f"Buy {item}?", Confirm)


@server.tool(description="Buy an item once confirmed.")
async def buy(item: str, confirmed: Annotated[Confirm, Resolve(confirm)]) -> str:
    _record(f"bought {item} {confirmed.ok}")
    return f"bought {item}" if confirmed.ok else f"not bought: {confirmed.note}"


@server.tool(description="Echo the text back.")
async def echo(text: str) -> str:
    return text


app = server.streamable_http_app()
