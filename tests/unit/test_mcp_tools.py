"""MCP tools (``interlock.http.mcp_tools``): a remote server's questions pause the turn, and answers resume it.

The server is the official SDK's (``tests/kit/mcp_server.py``), reached in this process (the
SDK's in-process client); the integration and fault tiers reach it over HTTP in its own process.
"""

from __future__ import annotations

import contextlib
import importlib
import pathlib
import sys
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

import mcp_server
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp_types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    ElicitRequestFormParams,
    InputRequiredResult,
)

from interlock import AgentError, AgentOutput, Message, PromptAgent, ToolRequestPart, ToolResponsePart
from interlock import metadata as md
from interlock._engine.surfacing import Pause
from interlock.errors import InvalidArgumentError, ToolError, ToolInputError, ToolOutputError
from interlock.http import McpTool
from interlock.http._inbox.service import answer_options
from interlock.http._mcp_questions import Question, answers_of, pause_for
from interlock.http._mcp_tools import McpServer, _mid_call  # pyright: ignore[reportPrivateUsage]
from interlock.inbox import Inbox, Reject, Respond
from interlock.interrupts import Decision, interrupt_as
from interlock.stores import SessionStore
from interlock.testing import ScriptedModel

BOOK = Message(role="model", content=[ToolRequestPart(name="book", ref="c1", input={"city": "Oslo", "nights": 2})])
ROOM = {"kind": "double", "breakfast": True}
CARD = {"card": "4242"}


@dataclass(frozen=True, kw_only=True)
class InProcess(McpServer):
    """The test server, reached by the SDK's in-process client instead of over HTTP."""

    app: MCPServer

    @contextlib.asynccontextmanager
    async def connect(self) -> AsyncGenerator[Client]:
        async with Client(self.app, elicitation_callback=_mid_call) as client:  # as McpServer's: it can be asked
            yield client


@pytest.fixture
def runs(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    path = tmp_path / "runs.txt"
    path.touch()
    monkeypatch.setenv("MCP_RUNS", str(path))
    return path


async def tools() -> list[McpTool]:
    server = InProcess(url="in-process", app=mcp_server.server)
    return [McpTool(server, listed) for listed in await server.list_tools()]


async def travel(store: SessionStore, *script: Message | str) -> PromptAgent:
    return PromptAgent("travel", ScriptedModel(list(script)), tools=await tools(), store=store)


async def paused(store: SessionStore) -> tuple[PromptAgent, AgentOutput]:
    agent = await travel(store, BOOK, "done")
    out = await agent.run("book Oslo")
    assert out.finish_reason == "interrupted", out.error
    return agent, out


async def test_tools_carry_the_servers_names_descriptions_and_input_schemas() -> None:
    found = {t.name: t for t in await tools()}
    assert sorted(found) == ["book", "buy", "echo", "pay"]
    assert found["book"].description == "Book a hotel; asks which room and how to pay."
    schema = found["book"].definition.input_schema or {}
    assert schema["required"] == ["city", "nights"]
    assert schema["properties"]["nights"]["type"] == "integer"


async def test_a_call_without_questions_returns_the_servers_structured_result(store: SessionStore) -> None:
    call = Message(role="model", content=[ToolRequestPart(name="echo", ref="e1", input={"text": "hi"})])
    out = await (await travel(store, call, "said")).run("say hi")
    assert out.finish_reason == "stop", out.error
    snap = await store.load(out.snapshot_id or "")
    assert snap is not None and snap.state is not None
    outputs = [p.output for m in snap.state.messages for p in m.content if p.kind == "tool_response"]
    assert outputs == [{"result": "hi"}]


async def test_input_not_fitting_the_servers_schema_is_refused_naming_the_field() -> None:
    book = next(t for t in await tools() if t.name == "book")
    with pytest.raises(ToolInputError, match=r"\$\.nights"):
        book.validate_input({"city": "Oslo", "nights": "two"})


async def test_input_required_pauses_with_one_interrupt_per_question_and_keeps_the_request_state(
    store: SessionStore, runs: pathlib.Path
) -> None:
    _, out = await paused(store)
    asked = {p.ref or "": p for p in out.interrupts}
    assert sorted(asked) == ["c1/payment", "c1/room"]
    room = interrupt_as(ElicitRequestFormParams, asked["c1/room"])
    assert room.message == "Which room in Oslo?"
    assert room.requested_schema == mcp_server.ROOM
    assert all(p.name == "book" and md.surfaced_from(p) == {"name": "book", "ref": "c1"} for p in asked.values())
    snap = await store.load(out.snapshot_id or "")
    assert snap is not None and snap.state is not None
    call = next(p for p in snap.state.messages[-1].content if isinstance(p, ToolRequestPart) and p.ref == "c1")
    record = call.meta(md.DELEGATED)
    assert record["state"]["requestState"]  # the server's, sealed by it; kept for the retry
    assert sorted(ToolRequestPart.from_json(q).ref or "" for q in record["interrupts"]) == ["payment", "room"]
    assert runs.read_text() == ""


async def test_answers_from_the_inbox_retry_the_call_once_with_them(store: SessionStore, runs: pathlib.Path) -> None:
    agent, out = await paused(store)
    inbox = Inbox(store, agents=[agent])
    done = await inbox.answer_all(out.snapshot_id or "", {"c1/room": Respond(ROOM), "c1/payment": Respond(CARD)})
    assert done.finish_reason == "stop", done.error
    assert runs.read_text() == "booked Oslo double 4242\n"
    snap = await store.load(done.snapshot_id or "")
    assert snap is not None and snap.state is not None
    outputs = [p.output for m in snap.state.messages for p in m.content if p.kind == "tool_response"]
    assert outputs == [{"result": "booked 2 nights in Oslo: double room, card 4242"}]


@pytest.mark.parametrize(
    ("room", "field"),
    [({"kind": "triple", "breakfast": True}, "kind"), ({"kind": "single"}, "breakfast"), (ROOM | {"x": 1}, "x")],
)
async def test_an_answer_off_the_requested_schema_is_refused_before_anything_runs(
    store: SessionStore, runs: pathlib.Path, room: dict[str, Any], field: str
) -> None:
    agent, out = await paused(store)
    inbox = Inbox(store, agents=[agent])
    with pytest.raises(AgentError, match=field) as refused:
        await inbox.answer_all(out.snapshot_id or "", {"c1/room": Respond(room), "c1/payment": Respond(CARD)})
    assert refused.value.status == "INVALID_ARGUMENT"
    assert runs.read_text() == ""
    assert len(await inbox.get(out.snapshot_id or "")) == 2  # still waiting, unclaimed


async def test_a_rejection_declines_the_question(store: SessionStore, runs: pathlib.Path) -> None:
    agent, out = await paused(store)
    inbox = Inbox(store, agents=[agent])
    done = await inbox.answer_all(out.snapshot_id or "", {"c1/room": Respond(ROOM), "c1/payment": Reject()})
    assert done.finish_reason == "stop", done.error
    assert runs.read_text() == "declined Oslo\n"


async def test_the_inbox_offers_the_requested_schema_as_the_answers_form(store: SessionStore) -> None:
    agent, out = await paused(store)
    inbox = Inbox(store, agents=[agent])
    room = next(i for i in await inbox.get(out.snapshot_id or "") if i.ref == "c1/room")
    options = answer_options(inbox, room)
    assert options["respond"]["output_schema"] == mcp_server.ROOM
    assert options["approve"]["payload_schema"] == mcp_server.ROOM
    assert "reject" in options


async def test_the_tools_interrupted_gives_a_call_typed_by_the_question(store: SessionStore) -> None:
    agent, out = await paused(store)
    book = next(t for t in agent.tools if t.name == "book")
    room = book.interrupted(next(p for p in out.interrupts if p.ref == "c1/room"))
    assert room is not None
    assert room.data_as(ElicitRequestFormParams).message == "Which room in Oslo?"
    with pytest.raises(ToolOutputError, match="breakfast"):
        room.respond({"kind": "single", "breakfast": "yes"})
    assert room.restart(ROOM).meta(md.RESUMED) == ROOM
    with pytest.raises(InvalidArgumentError, match="kind"):
        room.restart({"kind": 1, "breakfast": True})


async def test_a_question_asked_the_sdks_own_way_pauses_and_its_answer_completes_the_call(
    store: SessionStore, runs: pathlib.Path
) -> None:
    """``buy`` asks with a ``Resolve(Elicit[Confirm])`` parameter: the SDK builds and seals the request itself."""
    call = Message(role="model", content=[ToolRequestPart(name="buy", ref="b1", input={"item": "tea"})])
    agent = await travel(store, call, "bought")
    out = await agent.run("buy tea")
    assert out.finish_reason == "interrupted", out.error
    [question] = out.interrupts
    asked = interrupt_as(ElicitRequestFormParams, question)
    assert asked.message == "Buy tea?" and set(asked.requested_schema["properties"]) == {"ok", "note"}
    done = await Inbox(store, agents=[agent]).answer_all(out.snapshot_id or "", Respond({"ok": True}))
    assert done.finish_reason == "stop", done.error
    assert runs.read_text() == "bought tea True\n"


async def test_without_the_mcp_extra_the_import_error_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in sys.modules if n == "interlock.http._mcp_tools"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mcp", None)
    with pytest.raises(ImportError, match=r"interlock\[mcp\]"):
        importlib.import_module("interlock.http._mcp_tools")


def _question(key: str, data: dict[str, Any]) -> ToolRequestPart:
    return ToolRequestPart(name="book", ref=key, input={}, metadata={md.INTERRUPT: data})


def test_answers_become_elicitation_results_accept_with_content_or_decline() -> None:
    form = {"mode": "form", "message": "Which room?", "requestedSchema": mcp_server.ROOM}
    url = {"mode": "url", "message": "Sign in", "url": "https://example.com/login"}
    asked = (_question("a", form), _question("b", form), _question("c", form), _question("d", form))
    pause = Pause(agent="book", state={"requestState": "s1"}, interrupts=(*asked, _question("e", url)))
    entries = [
        Decision.respond(ROOM).answer(asked[0]),  # accept, with the answer
        Decision.deny().answer(asked[1]),  # a denial: decline
        Decision.restart(ROOM).answer(asked[2]),  # a restart's payload is the answer too
        Decision.restart({"approved": False}, decision="deny").answer(asked[3]),  # the inbox's reject
        Decision.restart().answer(pause.interrupts[4]),  # a URL question: accepted, no content
    ]
    resume = {
        "respond": [e.to_json() for e in entries if isinstance(e, ToolResponsePart)],
        "restart": [e.to_json() for e in entries if isinstance(e, ToolRequestPart)],
    }
    responses, state = answers_of({"delegation": pause.to_json(), "resume": resume})
    assert state == "s1"
    assert {k: (r.action, r.content) for k, r in responses.items()} == {
        "a": ("accept", ROOM),
        "b": ("decline", None),
        "c": ("accept", ROOM),
        "d": ("decline", None),
        "e": ("accept", None),
    }


def test_a_request_for_sampling_fails_the_call_naming_it() -> None:
    sampling = CreateMessageRequest(params=CreateMessageRequestParams(messages=[], max_tokens=10))
    with pytest.raises(ToolError, match="sampling/createMessage"):
        pause_for("book", {}, InputRequiredResult(input_requests={"s": sampling}, request_state="x"))


def test_a_question_refuses_a_payload_off_its_schema_and_takes_a_denial() -> None:
    asked = ElicitRequestFormParams(message="Which room?", requested_schema=mcp_server.ROOM)
    question = Question("book", asked)
    assert question.validate_resume({"approved": False, md.APPROVAL: False}) is None
    assert question.validate_respond(None) is None
    with pytest.raises(ToolInputError, match="breakfast"):
        question.validate_resume({"kind": "single", "breakfast": 1})
    with pytest.raises(ToolOutputError, match="not an object"):
        question.validate_respond("single")
