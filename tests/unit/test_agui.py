"""AG-UI 1.0 beside the Genkit routes (``AgentServer(protocols=[AGUI()])``), driven in process.

Every event of every stream is parsed by ``ag_ui.core``'s models. The real ``@ag-ui/client``
drives a real server in ``tests/integration/test_agui_client.py``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from ag_ui.core import Event, RunErrorEvent, RunFinishedEvent, RunFinishedInterruptOutcome
from inbox_apps import RUNS, Approval, Question, build_agents, who
from pydantic import TypeAdapter

from interlock import PromptAgent, ToolContext, tool
from interlock.http import AGUI, AgentServer
from interlock.http._service import Acceptance, acceptance
from interlock.inbox import Approve, Respond
from interlock.stores.memory import InMemoryStore
from interlock.testing import EchoModel
from interlock.tools import OnExpire

EVENT: TypeAdapter[Any] = TypeAdapter(Event)
HEADERS = {"x-user": "ann"}


def events_of(text: str) -> list[Any]:
    """Every ``data:`` frame of an SSE body, parsed by ag_ui's models."""
    return [EVENT.validate_json(block[len("data: ") :]) for block in text.split("\n\n") if block.startswith("data: ")]


def types(events: list[Any]) -> list[str]:
    return [e.type.value for e in events]


@pytest.fixture
async def http() -> Any:
    store = InMemoryStore()
    agents = [*build_agents(store), PromptAgent("echo", EchoModel(), store=InMemoryStore())]
    app = AgentServer(agents, context=who, protocols=[AGUI()])
    RUNS.clear()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        yield client


async def run(http: httpx.AsyncClient, agent: str, **body: Any) -> list[Any]:
    body = dict[str, Any]({"threadId": "th", "runId": "r", "messages": []}) | body
    got = await http.post(f"/ag-ui/{agent}", json=body, headers=HEADERS)
    assert got.status_code == 200, got.text
    assert got.headers["content-type"].startswith("text/event-stream")
    return events_of(got.text)


def say(text: str) -> list[dict[str, Any]]:
    return [{"id": "m1", "role": "user", "content": text}]


def error_of(events: list[Any]) -> RunErrorEvent:
    last = events[-1]
    assert isinstance(last, RunErrorEvent), types(events)
    return last


def outcome_of(events: list[Any]) -> RunFinishedInterruptOutcome:
    last = events[-1]
    assert isinstance(last, RunFinishedEvent) and isinstance(last.outcome, RunFinishedInterruptOutcome)
    return last.outcome


async def test_streamed_text_is_one_text_message(http: httpx.AsyncClient) -> None:
    events = await run(http, "echo", messages=say("hi"))
    assert types(events) == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "STATE_SNAPSHOT",
        "RUN_FINISHED",
    ]
    assert "".join(e.delta for e in events if e.type.value == "TEXT_MESSAGE_CONTENT") == "Echo: hi"
    assert events[-1].outcome is None


async def test_a_pause_lists_each_call_with_its_answer_schema(http: httpx.AsyncClient) -> None:
    events = await run(http, "bank", messages=say("pay bob 5 and carl 7"))
    assert types(events)[:4] == ["RUN_STARTED", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]
    first, second = outcome_of(events).interrupts
    assert (first.id, second.id, first.tool_call_id) == ("t1", "t2", "t1")
    assert first.response_schema is not None and "approved" in first.response_schema["properties"]
    assert first.metadata is not None
    assert first.metadata["tool"] == "transfer" and first.metadata["input"] == {"to": "bob", "amount": 5.0}
    assert first.metadata["interrupt"]["question"] == "Send 5 EUR to bob?"
    assert first.expires_at is None


async def test_a_resume_answers_each_interrupt_by_id(http: httpx.AsyncClient) -> None:
    await run(http, "bank", messages=say("pay bob 5 and carl 7"))
    resume = [
        {"interruptId": "t1", "status": "resolved", "payload": {"approved": True}},
        {"interruptId": "t2", "status": "cancelled"},
    ]
    events = await run(http, "bank", resume=resume)
    results = [e for e in events if e.type.value == "TOOL_CALL_RESULT"]
    assert [(r.tool_call_id, r.content) for r in results] == [
        ("t1", '{"status":"sent","reference":"T-bob-5"}'),
        ("t2", '{"status":"cancelled"}'),
    ]
    assert RUNS == [{"to": "bob", "amount": 5.0}]
    assert types(events)[-1] == "RUN_FINISHED" and events[-1].outcome is None


@pytest.mark.parametrize(
    ("resume", "code"),
    [
        ([{"interruptId": "t1", "status": "resolved"}], "FAILED_PRECONDITION"),  # t2 uncovered
        (
            [{"interruptId": "t1", "status": "cancelled"}, {"interruptId": "nope", "status": "cancelled"}],
            "INVALID_ARGUMENT",
        ),
        (
            [{"interruptId": "t1", "status": "cancelled"}, {"interruptId": "t1", "status": "cancelled"}],
            "INVALID_ARGUMENT",
        ),
    ],
)
async def test_a_resume_that_does_not_cover_the_pause_is_a_run_error(
    http: httpx.AsyncClient, resume: list[dict[str, Any]], code: str
) -> None:
    await run(http, "bank", messages=say("pay bob 5 and carl 7"))
    assert error_of(await run(http, "bank", resume=resume)).code == code
    both = [{"interruptId": i, "status": "resolved", "payload": {"approved": True}} for i in ("t1", "t2")]
    await run(http, "bank", resume=both)  # nothing was claimed: the pause still takes its answers
    assert len(RUNS) == 2


async def test_a_replay_is_aborted(http: httpx.AsyncClient) -> None:
    await run(http, "bank", messages=say("pay bob 5"))
    resume = [{"interruptId": "t1", "status": "resolved", "payload": {"approved": True}}]
    await run(http, "bank", resume=resume)
    error = error_of(await run(http, "bank", resume=resume))
    assert error.code == "ABORTED" and "already answered" in error.message
    assert len(RUNS) == 1


async def test_an_interrupt_only_call_is_resolved_with_its_output(http: httpx.AsyncClient) -> None:
    (asked,) = outcome_of(await run(http, "helpdesk", messages=say("ask what colour"))).interrupts
    assert asked.metadata is not None and asked.metadata["answer"] == "respond"
    assert asked.response_schema is not None and asked.response_schema["properties"].keys() == {"answer"}
    events = await run(
        http, "helpdesk", resume=[{"interruptId": "q1", "status": "resolved", "payload": {"answer": "red"}}]
    )
    assert [e.content for e in events if e.type.value == "TOOL_CALL_RESULT"] == ['{"answer":"red"}']
    wrong = [{"interruptId": "q1", "status": "resolved", "payload": {"answer": 3}}]
    await run(http, "helpdesk", threadId="x", messages=say("ask again"))
    assert error_of(await run(http, "helpdesk", threadId="x", resume=wrong)).code == "INVALID_ARGUMENT"


async def test_a_hold_is_a_tool_approval(http: httpx.AsyncClient) -> None:
    (held,) = outcome_of(await run(http, "ops", messages=say("delete /tmp/x"))).interrupts
    assert held.reason == "tool_approval"
    events = await run(http, "ops", resume=[{"interruptId": "d1", "status": "resolved"}])
    assert [e.content for e in events if e.type.value == "TOOL_CALL_RESULT"] == ["deleted /tmp/x"]


@tool(expires_in=0.001)
async def slow_yes(req: Question, ctx: ToolContext[Any], ok: Approval | None) -> str:
    """Asks, with a deadline that has passed by the time anyone answers."""
    if ok is None:
        ctx.interrupt({"question": req.question})
    return "ran"


async def test_an_expired_interrupt_takes_only_a_cancel() -> None:
    from interlock import Message, ToolRequestPart
    from interlock.models import ModelRequest, ModelResponse
    from interlock.testing import ScriptedModel

    def plan(request: ModelRequest) -> ModelResponse:
        if request.messages[-1].role == "tool":
            return ModelResponse(message=Message.model("over"))
        return ModelResponse(
            message=Message(
                role="model", content=[ToolRequestPart(name="slow_yes", ref="s1", input={"question": "yes?"})]
            )
        )

    agent = PromptAgent("clock", ScriptedModel([plan] * 10), tools=[slow_yes], store=InMemoryStore())
    app = AgentServer([agent], protocols=[AGUI()])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        (pending,) = outcome_of(await run(http, "clock", messages=say("go"))).interrupts
        assert pending.expires_at is not None
        await asyncio.sleep(0.01)  # past the 1 ms deadline, however fast the pause returned
        yes = [{"interruptId": "s1", "status": "resolved", "payload": {"approved": True}}]
        error = error_of(await run(http, "clock", resume=yes))
        assert error.code == "FAILED_PRECONDITION" and "expired" in error.message
        events = await run(http, "clock", resume=[{"interruptId": "s1", "status": "cancelled"}])
        assert types(events)[-1] == "RUN_FINISHED"


@tool(expires_in=0.001, on_expire=OnExpire.escalate("ops"))
async def escalating_yes(req: Question, ctx: ToolContext[Any], ok: Approval | None) -> str:
    """Asks with a deadline whose policy escalates: past it, the interrupt keeps waiting for a person."""
    if ok is None:
        ctx.interrupt({"question": req.question})
    return "ran" if ok.approved else "not run"


async def test_an_escalated_interrupt_past_its_deadline_still_takes_an_answer() -> None:
    from interlock import Message, ToolRequestPart
    from interlock.models import ModelRequest, ModelResponse
    from interlock.testing import ScriptedModel

    def plan(request: ModelRequest) -> ModelResponse:
        if request.messages[-1].role == "tool":
            return ModelResponse(message=Message.model("over: " + str(request.messages[-1].tool_responses[0].output)))
        call = ToolRequestPart(name="escalating_yes", ref="e1", input={"question": "yes?"})
        return ModelResponse(message=Message(role="model", content=[call]))

    agent = PromptAgent("esc", ScriptedModel([plan] * 10), tools=[escalating_yes], store=InMemoryStore())
    app = AgentServer([agent], protocols=[AGUI()])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        (pending,) = outcome_of(await run(http, "esc", messages=say("go"))).interrupts
        assert pending.expires_at is None  # it never stops taking answers
        yes = [{"interruptId": "e1", "status": "resolved", "payload": {"approved": True}}]
        events = await run(http, "esc", resume=yes)
        assert types(events)[-1] == "RUN_FINISHED"
        assert [e.content for e in events if e.type.value == "TOOL_CALL_RESULT"] == ["ran"]


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[]",
        b'{"threadId": "t"}',
        b'{"threadId": "t", "runId": "r", "messages": []}',
        b'{"threadId": "t", "runId": "r", "messages": [{"id": "a", "role": "assistant", "content": "x"}]}',
        b'{"threadId": "t", "runId": "r", "messages": [], "resume": [{"interruptId": "x", "status": "maybe"}]}',
    ],
)
async def test_what_is_not_a_run_is_a_run_error_event(http: httpx.AsyncClient, body: bytes) -> None:
    got = await http.post("/ag-ui/bank", content=body, headers=HEADERS)
    assert got.status_code == 200
    assert error_of(events_of(got.text)).code == "INVALID_ARGUMENT"


async def test_unknown_agents_and_threads_are_not_found(http: httpx.AsyncClient) -> None:
    assert error_of(await run(http, "nobody", messages=say("hi"))).code == "NOT_FOUND"
    resume = [{"interruptId": "t1", "status": "cancelled"}]
    assert error_of(await run(http, "bank", threadId="never", resume=resume)).code == "NOT_FOUND"


async def test_only_a_post_with_an_agent_and_a_caller_is_a_run(http: httpx.AsyncClient) -> None:
    assert (await http.get("/ag-ui/bank", headers=HEADERS)).status_code == 405
    assert (await http.post("/ag-ui", json={}, headers=HEADERS)).status_code == 404
    assert (await http.post("/ag-ui/bank", json={})).status_code == 401  # the context provider's refusal


def test_acceptance_is_respond_for_a_call_that_only_asks_else_approve() -> None:
    asks = acceptance({"respond": {"output_schema": {"type": "string"}}})
    assert asks == Acceptance(decision="respond", schema={"type": "string"})
    assert asks.answer("x") == Respond("x")
    approves = acceptance({"respond": {"output_schema": None}, "approve": {"payload_schema": None}})
    assert approves.answer(None) == Approve(None)


@pytest.fixture
async def client_http() -> Any:
    """A client-managed bank (no store) that signs its state."""
    from inbox_apps import plan, transfer

    from interlock.agents._host import Host
    from interlock.interrupts._signing import Keyring
    from interlock.testing import ScriptedModel

    host = Host(state_signing=Keyring({"k1": b"agui-test-key-0123456789abcdef!!"}))
    agent = PromptAgent("cbank", ScriptedModel([plan] * 100), tools=[transfer], host=host)
    app = AgentServer([agent], protocols=[AGUI()])
    RUNS.clear()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        yield client


async def test_a_client_managed_session_travels_signed_in_state(client_http: httpx.AsyncClient) -> None:
    paused = await run(client_http, "cbank", messages=say("pay bob 5"))
    (asked,) = outcome_of(paused).interrupts
    state = next(e.snapshot for e in paused if e.type.value == "STATE_SNAPSHOT")
    assert state["messages"] and state["custom"]["$interlock"]["sig"]
    resume = [{"interruptId": asked.id, "status": "resolved", "payload": {"approved": True}}]

    forged = json.loads(json.dumps(state).replace('"amount": 5.0', '"amount": 500.0'))  # a bigger transfer
    assert forged != state
    assert error_of(await run(client_http, "cbank", state=forged, resume=resume)).code == "PERMISSION_DENIED"
    assert RUNS == []
    assert error_of(await run(client_http, "cbank", resume=resume)).code == "INVALID_ARGUMENT"  # no state

    done = await run(client_http, "cbank", forwardedProps={"interlockState": state}, resume=resume)
    assert types(done)[-1] == "RUN_FINISHED" and done[-1].outcome is None
    assert RUNS == [{"to": "bob", "amount": 5.0}]
    after = next(e.snapshot for e in done if e.type.value == "STATE_SNAPSHOT")
    assert len(after["messages"]) > len(state["messages"])


async def test_a_call_that_only_asks_cannot_be_cancelled(http: httpx.AsyncClient) -> None:
    await run(http, "helpdesk", threadId="c", messages=say("ask why"))
    error = error_of(await run(http, "helpdesk", threadId="c", resume=[{"interruptId": "q1", "status": "cancelled"}]))
    assert error.code == "FAILED_PRECONDITION" and "respond" in error.message
