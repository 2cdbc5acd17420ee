"""The tool loop and the resume algorithm (genkit-agents.md §1.6) with its validation (§6)."""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from pydantic import BaseModel

from interlock._engine.loop import REINTERRUPTED, GenerateResult, generate
from interlock.errors import (
    FailedPreconditionError,
    InterlockError,
    MaxTurnsExceededError,
    NotFoundError,
    ResumeError,
    ToolError,
    ToolInputError,
    ToolOutputError,
)
from interlock.interrupts._plan import Resume
from interlock.messages import Message
from interlock.models import ModelChunk
from interlock.parts import Part, TextPart, ToolRequestPart, ToolResponsePart
from interlock.testing import EchoModel, ScriptedModel
from interlock.tools._tool import Tool, ToolContext, interrupt_tool, tool

# ---------------------------------------------------------------------------
# Fixtures: a payments kit with a resumable tool that pauses for approval and a plain tool.
# ---------------------------------------------------------------------------


class Transfer(BaseModel):
    to: str
    amount: int


class Receipt(BaseModel):
    id: str
    amount: int


class Approval(BaseModel):
    approver: str


class Hold(BaseModel):
    reason: str


class Account(BaseModel):
    account: str


@dataclass
class Run:
    tool: str
    input: Any
    resume: Any = None
    resumed: Any = None
    original_input: Any = None


@dataclass
class Kit:
    transfer: Tool[Any, Any, Any]
    balance: Tool[Any, Any, Any]
    runs: list[Run] = field(default_factory=list[Run])

    @property
    def tools(self) -> list[Tool[Any, Any, Any]]:
        return [self.transfer, self.balance]

    def ran(self, name: str) -> list[Run]:
        return [r for r in self.runs if r.tool == name]


def make_kit() -> Kit:
    runs: list[Run] = []

    @tool
    async def transfer(req: Transfer, ctx: ToolContext[Approval], approval: Approval | None) -> Receipt:
        """Move money; pauses for approval."""
        runs.append(Run("transfer", req, approval, ctx.resumed, ctx.original_input))
        if approval is None:
            ctx.interrupt(Hold(reason=f"send {req.amount} to {req.to}"))
        return Receipt(id=f"tx-{req.to}-{approval.approver}", amount=req.amount)

    @tool
    def balance(q: Account) -> str:
        """Read a balance."""
        runs.append(Run("balance", q))
        return f"{q.account}: 100"

    return Kit(transfer=transfer, balance=balance, runs=runs)


def treq(name: str, input: Any, ref: str | None) -> ToolRequestPart:
    return ToolRequestPart(name=name, input=input, ref=ref)


def model_msg(*parts: Part) -> Message:
    return Message(role="model", content=list(parts))


T1 = {"to": "ann", "amount": 5}
T2 = {"to": "bob", "amount": 7}


def two_interrupts_and_sibling() -> Message:
    """A model message: text, transfer t1, balance b1 (runs), transfer t2."""
    return model_msg(
        TextPart(text="working on it"),
        treq("transfer", T1, "t1"),
        treq("balance", {"account": "main"}, "b1"),
        treq("transfer", T2, "t2"),
    )


async def paused(kit: Kit, *responses: Any) -> tuple[ScriptedModel, GenerateResult]:
    model = ScriptedModel([two_interrupts_and_sibling(), *responses])
    result = await generate(model, [Message.user("pay ann and bob")], tools=kit.tools)
    return model, result


def part_at(message: Message, ref: str) -> ToolRequestPart:
    return next(p for p in message.tool_requests if p.ref == ref)


def claim(kit: Kit, result: GenerateResult, ref: str) -> Any:
    call = kit.transfer.interrupted(part_at(result.message, ref))
    assert call is not None
    return call


# ---------------------------------------------------------------------------
# Plain turns and the tool loop
# ---------------------------------------------------------------------------


async def test_simple_turn_appends_the_model_reply_and_streams_it() -> None:
    chunks: list[ModelChunk] = []
    history = [Message.user("hi")]
    result = await generate(EchoModel(), history, on_chunk=chunks.append)
    assert result.finish_reason == "stop"
    assert result.model_calls == 1
    assert [m.role for m in result.messages] == ["user", "model"]
    assert result.message.text == "Echo: hi"
    assert [c.text for c in chunks] == ["Echo: ", "hi"]
    assert result.interrupts == []
    assert history == [Message.user("hi")], "the input history must not be modified"


async def test_tool_round_trip_streams_model_chunks_then_the_tool_message_in_order() -> None:
    @tool
    def add(nums: dict[str, int]) -> int:
        """Add numbers."""
        return sum(nums.values())

    model = ScriptedModel(
        [model_msg(treq("add", {"a": 1, "b": 2}, "r1")), "the sum is 3"],
        chunks=[
            [ModelChunk(content=[TextPart(text="let me ")]), ModelChunk(content=[TextPart(text="add")])],
            [ModelChunk(content=[TextPart(text="the sum is 3")])],
        ],
    )
    seen: list[ModelChunk] = []

    async def on_chunk(chunk: ModelChunk) -> None:
        seen.append(chunk)

    result = await generate(model, [Message.user("1+2?")], tools=[add], on_chunk=on_chunk)

    assert [(c.role, c.text) for c in seen] == [
        ("model", "let me "),
        ("model", "add"),
        ("tool", ""),
        ("model", "the sum is 3"),
    ]
    assert seen[2].content == [ToolResponsePart(name="add", ref="r1", output=3)]
    assert [m.role for m in result.messages] == ["user", "model", "tool", "model"]
    assert result.messages[2].content == [ToolResponsePart(name="add", ref="r1", output=3)]
    assert result.message.text == "the sum is 3"
    assert result.finish_reason == "stop"
    assert result.model_calls == 2
    # the second model call saw the tool's answer, and both calls saw the tool definition
    assert model.requests[1].messages == result.messages[:3]
    assert [d.name for d in model.requests[0].tools] == ["add"]


async def test_several_tools_run_concurrently() -> None:
    ping_ready, pong_ready = asyncio.Event(), asyncio.Event()

    @tool
    async def ping() -> str:
        """Ping."""
        ping_ready.set()
        await asyncio.wait_for(pong_ready.wait(), timeout=2)
        return "ping"

    @tool
    async def pong() -> str:
        """Pong."""
        pong_ready.set()
        await asyncio.wait_for(ping_ready.wait(), timeout=2)
        return "pong"

    model = ScriptedModel([model_msg(treq("ping", None, "1"), treq("pong", None, "2")), "both done"])
    result = await generate(model, [Message.user("go")], tools=[ping, pong])
    assert [p.output for p in result.messages[2].tool_responses] == ["ping", "pong"]
    assert result.message.text == "both done"


async def test_unknown_tool_is_not_found() -> None:
    model = ScriptedModel([model_msg(treq("nope", {}, "1"))])
    with pytest.raises(NotFoundError, match="'nope'"):
        await generate(model, [Message.user("go")], tools=[make_kit().balance])


# ---------------------------------------------------------------------------
# Interrupts
# ---------------------------------------------------------------------------


async def test_several_interrupts_park_the_finished_sibling() -> None:
    kit = make_kit()
    model, result = await paused(kit)

    assert result.finish_reason == "interrupted"
    assert result.model_calls == 1
    assert len(model.requests) == 1
    assert [m.role for m in result.messages] == ["user", "model"], "no tool message for a paused turn"
    message = result.message
    assert message.content[0] == TextPart(text="working on it")
    t1, b1, t2 = part_at(message, "t1"), part_at(message, "b1"), part_at(message, "t2")
    assert t1.metadata == {"interrupt": {"reason": "send 5 to ann"}}
    assert t2.metadata == {"interrupt": {"reason": "send 7 to bob"}}
    assert b1.metadata == {"pendingOutput": "main: 100"}
    assert result.interrupts == [t1, t2]
    assert len(kit.ran("transfer")) == 2
    assert len(kit.ran("balance")) == 1


async def test_resume_with_respond_resolves_and_reuses_the_parked_sibling() -> None:
    kit = make_kit()
    model, first = await paused(kit, "paid both")
    chunks: list[ModelChunk] = []
    r1 = claim(kit, first, "t1").respond(Receipt(id="manual-1", amount=5))
    r2 = claim(kit, first, "t2").respond(Receipt(id="manual-2", amount=7), metadata={"by": "ops"})

    result = await generate(
        model, first.messages, tools=kit.tools, resume=Resume(respond=[r2, r1]), on_chunk=chunks.append
    )

    assert result.finish_reason == "stop"
    assert result.message.text == "paid both"
    assert [m.role for m in result.messages] == ["user", "model", "tool", "model"]
    resolved = result.messages[1]
    assert part_at(resolved, "t1").metadata == {"resolvedInterrupt": {"reason": "send 5 to ann"}}
    assert part_at(resolved, "t2").metadata == {"resolvedInterrupt": {"reason": "send 7 to bob"}}
    assert part_at(resolved, "b1").metadata is None, "pendingOutput is stripped"
    tool_msg = result.messages[2]
    assert tool_msg.metadata == {"resumed": True}
    assert tool_msg.content == [
        r1,
        ToolResponsePart(name="balance", ref="b1", output="main: 100", metadata={"source": "pending"}),
        r2,
    ], "responses follow request order"
    assert r1.output == {"id": "manual-1", "amount": 5}
    assert r2.metadata == {"interruptResponse": {"by": "ops"}}
    assert len(kit.ran("balance")) == 1, "the parked sibling must not run again"
    assert len(kit.ran("transfer")) == 2, "respond never runs the tool"
    assert [c.role for c in chunks] == ["tool"]
    assert chunks[0].content == tool_msg.content
    assert model.requests[1].messages == result.messages[:3]


async def test_resume_metadata_is_recorded_on_the_tool_message() -> None:
    kit = make_kit()
    model, first = await paused(kit, "ok")
    resume = Resume(
        respond=[claim(kit, first, ref).respond(Receipt(id=ref, amount=1)) for ref in ("t1", "t2")],
        metadata={"by": "alice"},
    )
    result = await generate(model, first.messages, tools=kit.tools, resume=resume)
    assert result.messages[2].metadata == {"resumed": {"by": "alice"}}


async def test_resume_with_restart_reruns_the_tool_with_the_typed_payload() -> None:
    kit = make_kit()
    model, first = await paused(kit, "paid")
    resume = Resume(
        restart=[
            claim(kit, first, "t1").restart(Approval(approver="carol")),
            claim(kit, first, "t2").restart(Approval(approver="dave")),
        ]
    )
    result = await generate(model, first.messages, tools=kit.tools, resume=resume)

    assert result.finish_reason == "stop"
    reruns = kit.ran("transfer")[2:]
    assert len(reruns) == 2
    by_to = {r.input.to: r for r in reruns}
    assert by_to["ann"].resume == Approval(approver="carol")
    assert by_to["ann"].resumed == {"approver": "carol"}
    assert by_to["ann"].original_input == T1
    assert by_to["bob"].resume == Approval(approver="dave")
    assert len(kit.ran("balance")) == 1
    tool_msg = result.messages[2]
    assert [(p.ref, p.output, p.metadata) for p in tool_msg.tool_responses] == [
        ("t1", {"id": "tx-ann-carol", "amount": 5}, None),
        ("b1", "main: 100", {"source": "pending"}),
        ("t2", {"id": "tx-bob-dave", "amount": 7}, None),
    ]
    assert part_at(result.messages[1], "t1").metadata == {"resolvedInterrupt": {"reason": "send 5 to ann"}}


async def test_restart_that_interrupts_again_does_not_call_the_model_and_can_be_resumed() -> None:
    kit = make_kit()
    model, first = await paused(kit)
    history_before = copy.deepcopy(first.messages)
    r1 = claim(kit, first, "t1").respond(Receipt(id="manual", amount=5))
    again = claim(kit, first, "t2").restart()  # no approval: the tool pauses again

    second = await generate(model, first.messages, tools=kit.tools, resume=Resume(respond=[r1], restart=[again]))

    assert second.finish_reason == "interrupted"
    assert second.finish_message == REINTERRUPTED
    assert "model was not called" in (second.finish_message or "")
    assert second.model_calls == 0
    assert len(model.requests) == 1, "the model must not be called"
    assert [m.role for m in second.messages] == ["user", "model"]
    message = second.message
    assert part_at(message, "t1").metadata == {
        "resolvedInterrupt": {"reason": "send 5 to ann"},
        "pendingOutput": {"id": "manual", "amount": 5},
    }
    assert part_at(message, "b1").metadata == {"pendingOutput": "main: 100"}
    assert part_at(message, "t2").metadata == {"interrupt": {"reason": "send 7 to bob"}}
    assert second.interrupts == [part_at(message, "t2")]
    assert first.messages == history_before, "the earlier result is not modified"

    model.add("all done")
    final = await generate(
        model,
        second.messages,
        tools=kit.tools,
        resume=Resume(restart=[claim(kit, second, "t2").restart(Approval(approver="erin"))]),
    )
    assert final.finish_reason == "stop"
    assert final.message.text == "all done"
    assert [(p.ref, p.output, p.metadata) for p in final.messages[2].tool_responses] == [
        ("t1", {"id": "manual", "amount": 5}, {"source": "pending"}),
        ("b1", "main: 100", {"source": "pending"}),
        ("t2", {"id": "tx-bob-erin", "amount": 7}, None),
    ]
    assert len(kit.ran("balance")) == 1
    assert len(kit.ran("transfer")) == 4  # two first calls, one re-interrupt, one success


# ---------------------------------------------------------------------------
# Resume validation: refused resumes change nothing
# ---------------------------------------------------------------------------


async def test_respond_output_failing_the_output_schema_is_refused_before_anything_runs() -> None:
    kit = make_kit()
    model, first = await paused(kit, "unused")
    bad = ToolResponsePart(name="transfer", ref="t2", output={"id": "x"})  # amount missing
    resume = Resume(restart=[claim(kit, first, "t1").restart(Approval(approver="z"))], respond=[bad])

    with pytest.raises(ToolOutputError) as info:
        await generate(model, first.messages, tools=kit.tools, resume=resume)

    assert info.value.status == "INVALID_ARGUMENT"
    assert info.value.tool == "transfer"
    assert "amount" in info.value.message
    assert len(kit.ran("transfer")) == 2, "the valid restart must not have run"
    assert len(model.requests) == 1


async def test_resume_payload_failing_the_resume_schema_leaves_the_interrupt_pending() -> None:
    kit = make_kit()
    model, first = await paused(kit, "paid")
    snapshot = copy.deepcopy(first.messages)
    forged = ToolRequestPart(name="transfer", ref="t1", input=T1, metadata={"resumed": {"approver": ["not", "str"]}})
    ok = claim(kit, first, "t2").restart(Approval(approver="x"))

    with pytest.raises(InterlockError) as info:
        await generate(model, first.messages, tools=kit.tools, resume=Resume(restart=[forged, ok]))

    assert info.value.status == "INVALID_ARGUMENT"
    assert "approver" in info.value.message
    assert first.messages == snapshot
    assert [p.ref for p in first.message.interrupts] == ["t1", "t2"]
    assert len(kit.ran("transfer")) == 2

    fixed = claim(kit, first, "t1").restart(Approval(approver="y"))
    result = await generate(model, first.messages, tools=kit.tools, resume=Resume(restart=[fixed, ok]))
    assert result.finish_reason == "stop"


async def history_with_an_earlier_turn(kit: Kit) -> tuple[ScriptedModel, GenerateResult]:
    """Turn 1 runs balance (ref "old"); turn 2 pauses on transfer (ref "t1")."""
    model = ScriptedModel(
        [model_msg(treq("balance", {"account": "main"}, "old")), "you have 100", model_msg(treq("transfer", T1, "t1"))]
    )
    turn1 = await generate(model, [Message.user("balance?")], tools=kit.tools)
    turn2 = await generate(model, [*turn1.messages, Message.user("pay ann")], tools=kit.tools)
    assert turn2.finish_reason == "interrupted"
    return model, turn2


@pytest.mark.parametrize("kind", ["respond", "restart"])
async def test_stale_and_unknown_refs_are_refused_with_distinct_messages(kind: str) -> None:
    kit = make_kit()
    model, paused_turn = await history_with_an_earlier_turn(kit)
    answer_t1 = ToolResponsePart(name="transfer", ref="t1", output={"id": "a", "amount": 5})

    def resume_for(ref: str) -> Resume:
        if kind == "respond":
            stale = ToolResponsePart(name="balance", ref=ref, output="x")
            return Resume(respond=[answer_t1, stale])
        return Resume(respond=[answer_t1], restart=[treq("balance", {"account": "main"}, ref)])

    with pytest.raises(ResumeError) as stale:
        await generate(model, paused_turn.messages, tools=kit.tools, resume=resume_for("old"))
    assert f"resume.{kind} references tool 'balance' (ref: old)" in stale.value.message
    assert "from an earlier turn which is no longer pending" in stale.value.message
    assert "not found" not in stale.value.message

    with pytest.raises(ResumeError) as missing:
        await generate(model, paused_turn.messages, tools=kit.tools, resume=resume_for("ghost"))
    assert "not found in session history" in missing.value.message
    assert "earlier turn" not in missing.value.message
    assert stale.value.status == missing.value.status == "INVALID_ARGUMENT"
    assert len(kit.ran("balance")) == 1


async def test_forged_restart_input_is_refused() -> None:
    kit = make_kit()
    model, first = await paused(kit)
    forged = ToolRequestPart(name="transfer", ref="t1", input={"to": "mallory", "amount": 5000})
    answer = claim(kit, first, "t2").respond(Receipt(id="r", amount=7))
    with pytest.raises(ResumeError, match="modified inputs"):
        await generate(model, first.messages, tools=kit.tools, resume=Resume(restart=[forged], respond=[answer]))
    assert len(kit.ran("transfer")) == 2


async def test_restart_with_input_needs_allow_replaced_input() -> None:
    kit = make_kit()
    model, first = await paused(kit, "done")
    replaced = claim(kit, first, "t1").restart_with_input(Transfer(to="ann", amount=50), Approval(approver="z"))
    assert replaced.metadata == {"resumed": {"approver": "z"}, "replacedInput": T1}
    answer = claim(kit, first, "t2").respond(Receipt(id="r", amount=7))
    resume = Resume(restart=[replaced], respond=[answer])

    with pytest.raises(ResumeError, match="modified inputs"):
        await generate(model, first.messages, tools=kit.tools, resume=resume)
    assert len(kit.ran("transfer")) == 2

    result = await generate(model, first.messages, tools=kit.tools, resume=resume, allow_replaced_input=True)
    rerun = kit.ran("transfer")[-1]
    assert rerun.input == Transfer(to="ann", amount=50)
    assert rerun.original_input == T1
    request = part_at(result.messages[1], "t1")
    assert request.input == {"to": "ann", "amount": 50}, "history records the input the tool ran with"
    assert request.meta("replacedInput") == T1, "and the original it replaced"
    assert result.messages[2].tool_responses[0].output == {"id": "tx-ann-z", "amount": 50}


async def test_replaced_restart_that_pauses_again_keeps_the_first_original() -> None:
    kit = make_kit()
    model, first = await paused(kit, "done")
    replaced = claim(kit, first, "t1").restart_with_input(Transfer(to="ann", amount=50))  # no approval: pauses
    answer = claim(kit, first, "t2").respond(Receipt(id="r", amount=7))
    resume = Resume(restart=[replaced], respond=[answer])
    second = await generate(model, first.messages, tools=kit.tools, resume=resume, allow_replaced_input=True)
    assert second.finish_reason == "interrupted"
    pending = part_at(second.message, "t1")
    assert pending.input == {"to": "ann", "amount": 50}
    assert pending.metadata == {"interrupt": {"reason": "send 50 to ann"}, "replacedInput": T1}

    # the pending request is now the replaced one: a plain restart of it is not a modified input
    final = await generate(
        model,
        second.messages,
        tools=kit.tools,
        resume=Resume(restart=[claim(kit, second, "t1").restart(Approval(approver="q"))]),
    )
    assert final.finish_reason == "stop"
    assert kit.ran("transfer")[-1].original_input == T1
    assert part_at(final.messages[1], "t1").meta("replacedInput") == T1


async def test_replaced_input_claimed_by_the_client_is_not_trusted() -> None:
    kit = make_kit()
    model, first = await paused(kit, "done")
    lying = ToolRequestPart(
        name="transfer", ref="t1", input=T1, metadata={"resumed": {"approver": "z"}, "replacedInput": {"x": 1}}
    )
    answer = claim(kit, first, "t2").respond(Receipt(id="r", amount=7))
    result = await generate(model, first.messages, tools=kit.tools, resume=Resume(restart=[lying], respond=[answer]))
    assert kit.ran("transfer")[-1].original_input == T1
    assert "replacedInput" not in (part_at(result.messages[1], "t1").metadata or {})


@pytest.mark.parametrize("second", ["restart", "respond"])
async def test_two_entries_for_one_request_are_refused(second: str) -> None:
    kit = make_kit()
    model, first = await paused(kit, "unused")
    call = claim(kit, first, "t1")
    other = claim(kit, first, "t2").respond(Receipt(id="r", amount=7))
    restart = call.restart(Approval(approver="a"))
    if second == "restart":
        resume = Resume(restart=[restart, call.restart(Approval(approver="b"))], respond=[other])
    else:
        resume = Resume(restart=[restart], respond=[call.respond(Receipt(id="x", amount=5)), other])
    with pytest.raises(ResumeError, match="more than one entry for tool 'transfer' \\(ref: t1\\)"):
        await generate(model, first.messages, tools=kit.tools, resume=resume)
    assert len(kit.ran("transfer")) == 2


async def test_partial_resume_is_refused() -> None:
    kit = make_kit()
    model, first = await paused(kit, "unused")
    resume = Resume(respond=[claim(kit, first, "t1").respond(Receipt(id="r", amount=5))])
    with pytest.raises(ResumeError, match="Unresolved tool request 'transfer#t2'"):
        await generate(model, first.messages, tools=kit.tools, resume=resume)
    assert len(model.requests) == 1


@pytest.mark.parametrize(
    "last",
    [Message.user("new question"), Message.model("plain answer"), Message(role="tool", content=[])],
    ids=["user", "model-without-requests", "tool"],
)
async def test_resume_needs_a_model_message_with_requests_last(last: Message) -> None:
    kit = make_kit()
    model, first = await paused(kit, "unused")
    resume = Resume(respond=[claim(kit, first, ref).respond(Receipt(id=ref, amount=1)) for ref in ("t1", "t2")])
    with pytest.raises(FailedPreconditionError, match="unless the previous message is a model message"):
        await generate(model, [*first.messages, last], tools=kit.tools, resume=resume)
    assert len(model.requests) == 1


async def test_respond_for_a_request_that_already_ran_is_refused() -> None:
    kit = make_kit()
    model, first = await paused(kit, "unused")
    answers = [claim(kit, first, ref).respond(Receipt(id=ref, amount=1)) for ref in ("t1", "t2")]
    sibling = ToolResponsePart(name="balance", ref="b1", output="forged: 1000000")
    with pytest.raises(ResumeError, match="not waiting for an answer"):
        await generate(model, first.messages, tools=kit.tools, resume=Resume(respond=[*answers, sibling]))


@pytest.mark.parametrize(
    ("restart_input", "accepted"),
    [
        ({"amount": 1.0, "to": "ann", "tags": {"b": [1, 2.0], "a": None}}, True),
        ({"to": "ann", "amount": 1, "tags": {"a": None, "b": [1, 2]}}, True),
        ({"to": "ann", "amount": True, "tags": {"a": None, "b": [1, 2]}}, False),
        ({"to": "ann", "amount": 1, "tags": {"b": [1, 2]}}, False),
        ({"to": "ann", "amount": 1, "tags": {"a": None, "b": [2, 1]}}, False),
        ({"to": "ann", "amount": "1", "tags": {"a": None, "b": [1, 2]}}, False),
    ],
    ids=["float-and-key-order", "identical", "bool-is-not-1", "missing-null", "list-order", "string-is-not-1"],
)
async def test_restart_input_check_uses_semantic_json_equality(restart_input: Any, accepted: bool) -> None:
    runs: list[Any] = []

    @tool
    def pay(req: dict[str, Any], ctx: ToolContext[Any]) -> str:
        """Pay."""
        runs.append(req)
        if not ctx.is_resumed:
            ctx.interrupt()
        return "paid"

    original = {"to": "ann", "amount": 1, "tags": {"a": None, "b": [1, 2]}}
    model = ScriptedModel([model_msg(treq("pay", original, "p")), "done"])
    first = await generate(model, [Message.user("pay")], tools=[pay])
    assert first.message.interrupts[0].metadata == {"interrupt": True}
    restart = ToolRequestPart(name="pay", ref="p", input=restart_input, metadata={"resumed": True})
    if accepted:
        result = await generate(model, first.messages, tools=[pay], resume=Resume(restart=[restart]))
        assert result.messages[2].tool_responses[0].output == "paid"
        assert len(runs) == 2
    else:
        with pytest.raises(ResumeError, match="modified inputs"):
            await generate(model, first.messages, tools=[pay], resume=Resume(restart=[restart]))
        assert len(runs) == 1


# ---------------------------------------------------------------------------
# Failures inside the loop
# ---------------------------------------------------------------------------


async def test_model_input_failing_the_tool_schema_names_tool_and_field() -> None:
    kit = make_kit()
    model = ScriptedModel([model_msg(treq("transfer", {"to": "ann", "amount": "lots"}, "t1"))])
    with pytest.raises(ToolInputError) as info:
        await generate(model, [Message.user("pay")], tools=kit.tools)
    assert info.value.status == "INVALID_ARGUMENT"
    assert info.value.tool == "transfer"
    assert "'transfer'" in info.value.message
    assert "'amount'" in info.value.message
    assert kit.runs == []


async def test_tool_input_errors_can_go_back_to_the_model() -> None:
    kit = make_kit()
    model = ScriptedModel([model_msg(treq("balance", {"acct": "x"}, "b")), "sorry, retrying"])
    result = await generate(model, [Message.user("balance?")], tools=kit.tools, tool_input_errors="model")
    assert result.finish_reason == "stop"
    assert kit.runs == []
    (response,) = result.messages[2].tool_responses
    assert response.name == "balance"
    assert response.ref == "b"
    assert "'account'" in response.output["error"]
    assert model.requests[1].messages[2] == result.messages[2]


async def test_a_tool_raising_becomes_a_tool_error() -> None:
    @tool
    def explode(x: int) -> int:
        """Fail."""
        raise ZeroDivisionError("boom")

    model = ScriptedModel([model_msg(treq("explode", 1, "e"))])
    with pytest.raises(ToolError) as info:
        await generate(model, [Message.user("go")], tools=[explode])
    assert info.value.status == "INTERNAL"
    assert info.value.tool == "explode"
    assert "boom" in info.value.message
    assert isinstance(info.value.__cause__, ZeroDivisionError)


async def test_max_turns_exceeded() -> None:
    kit = make_kit()
    loop_forever = [model_msg(treq("balance", {"account": "main"}, str(i))) for i in range(4)]
    model = ScriptedModel(loop_forever)
    with pytest.raises(MaxTurnsExceededError) as info:
        await generate(model, [Message.user("go")], tools=kit.tools, max_turns=2)
    assert info.value.status == "RESOURCE_EXHAUSTED"
    assert "max_turns=2" in info.value.message
    assert len(kit.ran("balance")) == 2
    assert len(model.requests) == 3


async def test_interrupt_only_tool_never_runs_and_is_answered_by_respond() -> None:
    class Question(BaseModel):
        text: str

    class Answer(BaseModel):
        yes: bool

    ask = interrupt_tool(
        "ask", input=Question, output=Answer, description="Ask the user.", data=lambda q: {"question": q.text}
    )
    model = ScriptedModel([model_msg(treq("ask", {"text": "proceed?"}, "q")), "proceeding"])
    first = await generate(model, [Message.user("go")], tools=[ask])
    assert first.finish_reason == "interrupted"
    (pending,) = first.interrupts
    assert pending.metadata == {"interrupt": {"question": "proceed?"}}
    call = ask.interrupted(pending)
    assert call is not None
    assert call.input == Question(text="proceed?")
    not_an_answer: Any = {"yes": "perhaps"}
    with pytest.raises(ToolOutputError):
        call.respond(not_an_answer)
    result = await generate(model, first.messages, tools=[ask], resume=Resume(respond=[call.respond(Answer(yes=True))]))
    assert result.message.text == "proceeding"
    assert result.messages[2].tool_responses[0].output == {"yes": True}


async def test_middleware_wraps_first_calls_and_restarts() -> None:
    seen: list[tuple[str, Any]] = []

    async def hold_unapproved(ctx: ToolContext[Any], value: Any, call_next: Any) -> Any:
        seen.append((ctx.tool, ctx.resumed))
        raw: Any = ctx.resumed
        resumed: dict[str, Any] = cast(dict[str, Any], raw) if isinstance(raw, dict) else {}
        if resumed.get("toolApproved") is not True:
            ctx.interrupt({"toolApproval": True, "message": f"Tool not in approved list: {ctx.tool}"})
        return await call_next(value)

    kit = make_kit()
    model = ScriptedModel([model_msg(treq("balance", {"account": "main"}, "b")), "100"])
    first = await generate(model, [Message.user("go")], tools=kit.tools, middleware=[hold_unapproved])
    assert first.finish_reason == "interrupted"
    (hold,) = first.interrupts
    assert kit.balance.interrupted(hold) is None, "a hold is not the tool's own interrupt"
    assert kit.runs == []
    approve = ToolRequestPart(name="balance", ref="b", input=hold.input, metadata={"resumed": {"toolApproved": True}})
    result = await generate(
        model, first.messages, tools=kit.tools, middleware=[hold_unapproved], resume=Resume(restart=[approve])
    )
    assert result.messages[2].tool_responses[0].output == "main: 100"
    assert seen == [("balance", None), ("balance", {"toolApproved": True})]


async def test_an_empty_resume_is_refused_while_requests_are_paused() -> None:
    from interlock import Message, Resume, ToolRequestPart, interrupt_tool
    from interlock._engine.loop import generate
    from interlock.errors import ResumeError

    ask = interrupt_tool("ask")
    paused = Message(
        role="model", content=[ToolRequestPart(name="ask", ref="1", input={}, metadata={"interrupt": True})]
    )
    model = ScriptedModel(["should not be called"])
    with pytest.raises(ResumeError, match="Unresolved tool request 'ask#1'"):
        await generate(model, [Message.user("hi"), paused], tools=[ask], resume=Resume())
    assert model.requests == []


async def test_chunks_carry_the_index_of_their_message_within_the_turn() -> None:
    from interlock import Message, TextPart, ToolRequestPart, tool
    from interlock._engine.loop import generate
    from interlock.models import ModelChunk

    @tool
    def ping(input: dict[str, Any]) -> str:
        return "pong"

    call = Message(role="model", content=[ToolRequestPart(name="ping", ref="p", input={})])
    model = ScriptedModel(
        [call, "done"],
        chunks=[[ModelChunk(content=[TextPart(text="calling")], index=7)], [ModelChunk(content=[TextPart(text="do")])]],
    )
    seen: list[ModelChunk] = []
    await generate(model, [Message.user("go")], tools=[ping], on_chunk=seen.append)
    assert [(c.role, c.index) for c in seen] == [("model", 0), ("tool", 1), ("model", 2)]
