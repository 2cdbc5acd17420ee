"""Tools: definitions from typed functions, invocation, and typed interrupt helpers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from interlock._engine.loop import generate
from interlock.errors import Interrupt, ToolInputError, ToolOutputError, UsageError
from interlock.interrupts._plan import interrupt_as, is_interrupt
from interlock.messages import Message
from interlock.parts import TextPart, ToolRequestPart, ToolResponsePart
from interlock.records._sessions import Session, SessionState
from interlock.testing import ScriptedModel
from interlock.tools._tool import InterruptedCall, ToolContext, interrupt_tool, tool


class Transfer(BaseModel):
    to: str
    amount: int


class Receipt(BaseModel):
    id: str
    note: str | None = None


class Approval(BaseModel):
    approver: str


class Hold(BaseModel):
    reason: str


class Forecast(TypedDict):
    city: str
    days: int


@dataclass
class Point:
    x: int
    y: int


def ctx_for(name: str, input: Any = None, **kw: Any) -> ToolContext[Any]:
    return ToolContext(tool=name, request=ToolRequestPart(name=name, input=input), **kw)


def paused_part(name: str, input: Any, interrupt: Any, ref: str | None = "r1") -> ToolRequestPart:
    return ToolRequestPart(name=name, ref=ref, input=input, metadata={"interrupt": interrupt})


@tool
async def transfer(req: Transfer, ctx: ToolContext[Approval], approval: Approval | None) -> Receipt:
    """Move money between accounts.

    Pauses for approval first.
    """
    if approval is None:
        ctx.interrupt(Hold(reason="needs approval"))
    return Receipt(id=f"{req.to}-{approval.approver}")


# ---------------------------------------------------------------------------
# Definitions
# ---------------------------------------------------------------------------


def test_schema_from_a_pydantic_model_and_description_from_the_docstring() -> None:
    d = transfer.definition
    assert d.name == "transfer"
    assert d.description == "Move money between accounts."
    assert d.input_schema is not None
    assert d.input_schema["type"] == "object"
    assert d.input_schema["properties"] == {
        "to": {"title": "To", "type": "string"},
        "amount": {"title": "Amount", "type": "integer"},
    }
    assert d.input_schema["required"] == ["to", "amount"]
    assert d.output_schema is not None
    assert set(d.output_schema["properties"]) == {"id", "note"}
    assert d.output_schema["required"] == ["id"]
    assert transfer.is_resumable
    assert not transfer.is_interrupt_only


def test_schema_from_plain_type_hints() -> None:
    @tool
    def forecast(q: Forecast) -> list[str]:
        """Forecast
        the weather.

        Second paragraph is not part of the description.
        """
        return [q["city"]] * q["days"]

    @tool
    def distance(p: Point) -> float:
        """Distance from the origin."""
        return (p.x**2 + p.y**2) ** 0.5

    @tool
    def shout(text: str):  # no return annotation: output is unconstrained
        return text.upper()

    assert forecast.definition.description == "Forecast the weather."
    assert forecast.definition.input_schema is not None
    assert forecast.definition.input_schema["properties"]["days"] == {"title": "Days", "type": "integer"}
    assert forecast.definition.output_schema == {"type": "array", "items": {"type": "string"}}
    assert distance.definition.input_schema is not None
    assert distance.definition.input_schema["required"] == ["x", "y"]
    assert distance.definition.output_schema == {"type": "number"}
    assert shout.definition.input_schema == {"type": "string"}
    assert shout.definition.output_schema is None
    assert shout.definition.description == ""
    assert not shout.is_resumable


def test_name_and_description_overrides() -> None:
    @tool(name="lookup_weather", description="Look it up.")
    def weather(city: str) -> str:
        """Ignored."""
        return city

    assert weather.name == "lookup_weather"
    assert weather.definition.name == "lookup_weather"
    assert weather.definition.description == "Look it up."


def test_a_tool_takes_at_most_input_ctx_and_resume() -> None:
    with pytest.raises(UsageError, match="at most"):

        @tool  # pyright: ignore[reportCallIssue, reportArgumentType, reportUntypedFunctionDecorator]
        def too_many(a: int, b: int, c: int) -> int:
            return a + b + c


def test_validate_input_names_the_field() -> None:
    assert transfer.validate_input({"to": "ann", "amount": "5"}) == Transfer(to="ann", amount=5)
    with pytest.raises(ToolInputError, match="field 'amount'") as info:
        transfer.validate_input({"to": "ann"})
    assert info.value.tool == "transfer"
    assert info.value.status == "INVALID_ARGUMENT"
    assert info.value.details[0]["loc"] == ("amount",)


# ---------------------------------------------------------------------------
# Invocation
# ---------------------------------------------------------------------------


async def test_sync_and_async_tools_return_json() -> None:
    @tool
    def sync_point(p: Point) -> Point:
        """Mirror."""
        return Point(x=p.y, y=p.x)

    @tool
    async def async_receipt(req: Transfer) -> Receipt:
        """Receipt."""
        return Receipt(id=req.to)

    assert await sync_point.invoke(Point(x=1, y=2), ctx_for("sync_point")) == {"x": 2, "y": 1}
    assert await async_receipt.invoke(Transfer(to="ann", amount=1), ctx_for("async_receipt")) == {"id": "ann"}


async def test_a_returned_value_is_checked_against_the_output_type() -> None:
    @tool
    def liar(x: int) -> int:
        """Returns the wrong type."""
        return "not a number"  # pyright: ignore[reportReturnType]

    with pytest.raises(ToolOutputError, match="output for tool 'liar'"):
        await liar.invoke(1, ctx_for("liar"))


async def test_tool_context_is_injected() -> None:
    seen: list[ToolContext[Any]] = []

    @tool
    def whoami(ctx: ToolContext[Any]) -> str:
        """Who is calling."""
        seen.append(ctx)
        return ctx.context["user"]

    model = ScriptedModel(
        [Message(role="model", content=[ToolRequestPart(name="whoami", ref="w", input=None)]), "you are ann"]
    )
    session = Session(SessionState())
    result = await generate(model, [Message.user("?")], tools=[whoami], session=session, context={"user": "ann"})
    assert result.messages[2].tool_responses[0].output == "ann"
    (ctx,) = seen
    assert ctx.tool == "whoami"
    assert ctx.request.ref == "w"
    assert ctx.session is session
    assert ctx.resumed is None
    assert not ctx.is_resumed
    assert ctx.resume is None


async def test_resumable_tool_gets_none_first_then_the_typed_payload() -> None:
    got: list[Any] = []

    @tool
    def approve(req: Transfer, ctx: ToolContext[Approval], approval: Approval | None) -> str:
        """Approve."""
        got.append((approval, ctx.resume, ctx.is_resumed))
        if approval is None:
            ctx.interrupt()
        return approval.approver

    with pytest.raises(Interrupt) as info:
        await approve.invoke(Transfer(to="a", amount=1), ctx_for("approve"))
    assert info.value.data is None
    assert got == [(None, None, False)]

    typed = approve.validate_resume({"approver": "bo"})
    out = await approve.invoke(Transfer(to="a", amount=1), ctx_for("approve", resumed={"approver": "bo"}, resume=typed))
    assert out == "bo"
    assert got[-1] == (Approval(approver="bo"), Approval(approver="bo"), True)


def test_validate_resume() -> None:
    assert transfer.validate_resume(None) is None
    assert transfer.validate_resume(True) is None, "a bare True carries no payload"
    assert transfer.validate_resume({"toolApproved": True}) is None, "the approval marker is not payload"
    assert transfer.validate_resume({"approver": "x", "toolApproved": True}) == Approval(approver="x")
    with pytest.raises(ToolInputError, match="resume payload for tool 'transfer'"):
        transfer.validate_resume({"approver": 3.5})


def test_ctx_interrupt_converts_models_to_json() -> None:
    with pytest.raises(Interrupt) as info:
        ctx_for("x").interrupt(Hold(reason="why"))
    assert info.value.data == {"reason": "why"}


# ---------------------------------------------------------------------------
# Claiming and answering interrupts
# ---------------------------------------------------------------------------


def test_interrupted_claims_this_tools_interrupt_typed() -> None:
    part = paused_part("transfer", {"to": "ann", "amount": 5}, {"reason": "needs approval"})
    call = transfer.interrupted(part)
    assert isinstance(call, InterruptedCall)
    assert call.input == Transfer(to="ann", amount=5)
    assert call.data == {"reason": "needs approval"}
    assert call.data_as(Hold) == Hold(reason="needs approval")
    assert call.part is part


def test_interrupted_returns_none_for_anything_else() -> None:
    other = paused_part("other_tool", {"to": "ann", "amount": 5}, True)
    hold = paused_part("transfer", {"to": "ann", "amount": 5}, {"message": "Tool not in approved list: transfer"})
    ran = ToolRequestPart(name="transfer", input={"to": "ann", "amount": 5}, metadata={"pendingOutput": {"id": "1"}})
    resolved = ToolRequestPart(name="transfer", input={"to": "a", "amount": 5}, metadata={"resolvedInterrupt": True})
    assert transfer.interrupted(other) is None
    assert transfer.interrupted(hold) is None
    assert transfer.interrupted(ran) is None
    assert transfer.interrupted(resolved) is None
    assert transfer.interrupted(TextPart(text="transfer")) is None
    assert transfer.interrupted(paused_part("transfer", {"to": "ann", "amount": 5}, {"toolApproval": False}))
    # the tool's own data may have a toolApproval key: only Genkit's hold message makes a hold
    assert transfer.interrupted(paused_part("transfer", {"to": "ann", "amount": 5}, {"toolApproval": True}))


def test_respond_validates_the_output() -> None:
    call = transfer.interrupted(paused_part("transfer", {"to": "ann", "amount": 5}, True, ref="abc"))
    assert call is not None
    part = call.respond(Receipt(id="r-1"))
    assert part == ToolResponsePart(
        name="transfer", ref="abc", output={"id": "r-1"}, metadata={"interruptResponse": True}
    )
    noted = call.respond({"id": "r-2", "note": "ok"}, metadata={"by": "ops"})  # pyright: ignore[reportArgumentType]
    assert noted.metadata == {"interruptResponse": {"by": "ops"}}
    with pytest.raises(ToolOutputError, match="field 'id'") as info:
        call.respond({"note": "no id"})  # pyright: ignore[reportArgumentType]
    assert info.value.tool == "transfer"


def test_restart_carries_the_original_input_and_the_payload() -> None:
    original = {"to": "ann", "amount": 5}
    call = transfer.interrupted(paused_part("transfer", original, True, ref="abc"))
    assert call is not None
    part = call.restart(Approval(approver="bo"))
    assert part == ToolRequestPart(name="transfer", ref="abc", input=original, metadata={"resumed": {"approver": "bo"}})
    assert call.restart().metadata == {"resumed": True}
    with pytest.raises(ToolInputError):
        call.restart({"approver": ["wrong"]})  # pyright: ignore[reportArgumentType]


def test_restart_with_input_records_the_original() -> None:
    original = {"to": "ann", "amount": 5}
    call = transfer.interrupted(paused_part("transfer", original, True, ref="abc"))
    assert call is not None
    part = call.restart_with_input(Transfer(to="ann", amount=6), Approval(approver="bo"))
    assert part.input == {"to": "ann", "amount": 6}
    assert part.metadata == {"resumed": {"approver": "bo"}, "replacedInput": original}
    assert not part.is_interrupt
    assert call.restart_with_input(Transfer(to="ann", amount=6)).metadata == {
        "resumed": True,
        "replacedInput": original,
    }


async def test_interrupt_tool_never_runs_and_computes_its_data() -> None:
    class Question(BaseModel):
        text: str

    ask = interrupt_tool("ask", input=Question, output=bool, data=lambda q: {"q": q.text})
    fixed = interrupt_tool("confirm", data=Hold(reason="always"))
    bare = interrupt_tool("bare")
    assert ask.is_interrupt_only
    assert ask.definition.output_schema == {"type": "boolean"}
    with pytest.raises(Interrupt) as info:
        await ask.invoke(Question(text="go?"), ctx_for("ask"))
    assert info.value.data == {"q": "go?"}
    with pytest.raises(Interrupt) as info:
        await fixed.invoke({}, ctx_for("confirm"))
    assert info.value.data == {"reason": "always"}
    with pytest.raises(Interrupt) as info:
        await bare.invoke(bare.validate_input(None), ctx_for("bare"))
    assert info.value.data is None


# ---------------------------------------------------------------------------
# interrupt_as and is_interrupt
# ---------------------------------------------------------------------------


def test_interrupt_as_reads_typed_data() -> None:
    part = paused_part("transfer", {}, {"reason": "x"})
    assert interrupt_as(Hold, part) == Hold(reason="x")
    assert interrupt_as(dict[str, str], part) == {"reason": "x"}
    with pytest.raises(ValueError, match="not an interrupted tool request"):
        interrupt_as(Hold, ToolRequestPart(name="transfer", input={}))
    with pytest.raises(ValueError):
        interrupt_as(Hold, paused_part("transfer", {}, {"other": 1}))


@pytest.mark.parametrize(
    ("value", "expected"),
    [(True, True), ({}, True), ({"a": 1}, True), ("why", True), (False, False), (None, False)],
)
def test_is_interrupt(value: Any, expected: bool) -> None:
    assert is_interrupt(paused_part("t", {}, value)) is expected


def test_is_interrupt_needs_a_tool_request_with_the_key() -> None:
    assert not is_interrupt(ToolRequestPart(name="t"))
    assert not is_interrupt(ToolRequestPart(name="t", metadata={"resolvedInterrupt": True}))
    assert not is_interrupt(TextPart(text="x", metadata={"interrupt": True}))
    assert not is_interrupt(ToolResponsePart(name="t", metadata={"interrupt": True}))
    assert Message(role="model", content=[paused_part("t", {}, {})]).interrupts != []
