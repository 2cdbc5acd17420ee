"""The interlock agents the real Genkit clients drive in tests/integration/test_interop.py.

Every (client, scenario) pair gets its own agent, named ``<client>_<scenario>`` and
served at ``<base>/<client>_<scenario>``, with its own store and its own scripted model,
so scenarios can run at the same time and each model script plays in a known order.
The models are interlock's test kit (:class:`ScriptedModel`, :class:`EchoModel`).

To poke at them by hand::

    cd tests/kit && ../../.venv/bin/interlock serve interop.app:app --port 8000
    node interop/js_client.cjs http://127.0.0.1:8000/api/js_stream stream
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel

from interlock import (
    Agent,
    InMemoryStore,
    Message,
    PromptAgent,
    TextPart,
    ToolContext,
    ToolRequestPart,
    interrupt_tool,
    tool,
)
from interlock.http._server import AgentServer, RequestInfo
from interlock.interrupts._signing import Keyring
from interlock.models import ModelChunk, ModelRequest, ModelResponse
from interlock.testing import EchoModel, ScriptedModel

CLIENTS = ("js", "py")
BASE_PATH = "/api"
POLL_WAIT = 10.0
"""The longest the detach_wait model waits for the client's first poll."""


@dataclass(kw_only=True)
class Setup:
    """One scenario's agent and what the test reads back from the server side."""

    agent: Agent
    store: InMemoryStore | None
    model: ScriptedModel | EchoModel
    log: list[Any] = field(default_factory=list[Any])
    """What the scenario's tools and slow model calls recorded, in order."""
    polled: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the client first reads one of the agent's snapshots (getSnapshot)."""


class Transfer(BaseModel):
    amount: int
    to: str


class Action(BaseModel):
    action: str


approve_transfer = interrupt_tool("approveTransfer", input=Transfer, description="Ask a person to approve a transfer.")


def confirm_action(log: list[Any]) -> Any:
    """A tool that pauses for confirmation unless restarted with ``metadata.resumed``."""

    @tool(name="confirmAction")
    def confirm(req: Action, ctx: ToolContext[Any]) -> dict[str, Any]:
        """Confirm an action before doing it."""
        log.append({"tool": "confirmAction", "resumed": ctx.resumed})
        if not ctx.is_resumed:
            ctx.interrupt({"requiresConfirmation": True})
        return {"result": f"confirmed: {req.action}", "resumedMetadata": ctx.resumed}

    return confirm


def asks(*parts: TextPart | ToolRequestPart) -> Message:
    return Message(role="model", content=list(parts))


def transfer_request(ref: str = "t1") -> ToolRequestPart:
    return ToolRequestPart(name="approveTransfer", ref=ref, input={"amount": 100, "to": "acct-1"})


def tool_answer(request: ModelRequest) -> ModelResponse:
    """The model's reply after a tool message: it repeats the tool's output."""
    last = request.messages[-1]
    response = last.tool_responses[0]
    text = f"Tool {response.name} returned {json.dumps(response.output, sort_keys=True)}"
    return ModelResponse(message=Message.model(text), finish_reason="stop")


def count_messages(request: ModelRequest) -> ModelResponse:
    """The model's reply that shows how much history the client sent back."""
    roles = ",".join(str(m.role) for m in request.messages)
    text = f"I see {len(request.messages)} messages: {roles}"
    return ModelResponse(message=Message.model(text), finish_reason="stop")


def chunks(*texts: str) -> list[ModelChunk]:
    return [ModelChunk(role="model", index=0, content=[TextPart(text=t)]) for t in texts]


def _stream(name: str) -> Setup:
    model = EchoModel()
    store = InMemoryStore()
    return Setup(agent=PromptAgent(name, model, store=store), store=store, model=model)


def _interrupt_respond(name: str) -> Setup:
    model = ScriptedModel([asks(TextPart(text="Need approval."), transfer_request()), tool_answer])
    store = InMemoryStore()
    agent = PromptAgent(name, model, tools=[approve_transfer], store=store)
    return Setup(agent=agent, store=store, model=model)


def _interrupt_restart(name: str) -> Setup:
    log: list[Any] = []
    request = ToolRequestPart(name="confirmAction", ref="c1", input={"action": "deploy"})
    model = ScriptedModel([asks(request), tool_answer])
    store = InMemoryStore()
    agent = PromptAgent(name, model, tools=[confirm_action(log)], store=store)
    return Setup(agent=agent, store=store, model=model, log=log)


def _echo_with_store(name: str) -> Setup:
    model = EchoModel()
    store = InMemoryStore()
    return Setup(agent=PromptAgent(name, model, store=store), store=store, model=model)


def _detach_wait(name: str) -> Setup:
    log: list[Any] = []
    polled = asyncio.Event()

    async def slow(request: ModelRequest) -> ModelResponse:
        # Finish only once the client has polled the pending snapshot, so it is sure to see "pending" first.
        try:
            async with asyncio.timeout(POLL_WAIT):
                await polled.wait()
            log.append("polled")
        except TimeoutError:
            log.append("not polled")
        await asyncio.sleep(0.2)
        log.append("finished")
        return ModelResponse(message=Message.model(f"Done: {request.messages[-1].text}"), finish_reason="stop")

    model = ScriptedModel([slow])
    store = InMemoryStore()
    agent = PromptAgent(name, model, store=store)
    return Setup(agent=agent, store=store, model=model, log=log, polled=polled)


def _detach_abort(name: str) -> Setup:
    log: list[Any] = []

    async def hang(request: ModelRequest) -> ModelResponse:
        log.append("started")
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            log.append("cancelled")
            raise
        log.append("finished")
        return ModelResponse(message=Message.model("too late"), finish_reason="stop")

    model = ScriptedModel([hang])
    store = InMemoryStore()
    return Setup(agent=PromptAgent(name, model, store=store), store=store, model=model, log=log)


def _client_managed(name: str) -> Setup:
    model = ScriptedModel(
        [
            "Hello there",
            asks(TextPart(text="Need approval."), transfer_request("t7")),
            tool_answer,
            count_messages,
        ],
        chunks=[chunks("Hello ", "there"), chunks("Need approval.")],
    )
    return Setup(agent=PromptAgent(name, model, tools=[approve_transfer]), store=None, model=model)


SIGNING_KEYS = Keyring({"k1": "interop-test-key-0123456789abcdef-0123"})


def _client_managed_signed(name: str) -> Setup:
    setup = _client_managed(name)
    setup.agent.host = replace(setup.agent.host, state_signing=SIGNING_KEYS)
    return setup


_BUILDERS: dict[str, Callable[[str], Setup]] = {
    "stream": _stream,
    "interrupt_respond": _interrupt_respond,
    "interrupt_restart": _interrupt_restart,
    "snapshots": _echo_with_store,
    "load_chat": _echo_with_store,
    "detach_wait": _detach_wait,
    "detach_abort": _detach_abort,
    "client_managed": _client_managed,
    "client_managed_signed": _client_managed_signed,
    "errors": _echo_with_store,
}
SCENARIOS = tuple(_BUILDERS)
"""The scenario names, as the client scripts know them."""


def build() -> dict[str, Setup]:
    """A fresh setup for every (client, scenario), keyed by the agent's URL name ``<client>_<scenario>``."""
    setups: dict[str, Setup] = {}
    for client in CLIENTS:
        for scenario in SCENARIOS:
            name = f"{client}_{scenario}"
            setups[name] = _BUILDERS[scenario](name)
    return setups


def create_server(setups: dict[str, Setup]) -> AgentServer:
    """Serve the setups' agents under :data:`BASE_PATH`, noting each agent's first snapshot read."""

    def context(info: RequestInfo) -> dict[str, Any]:
        setup = setups.get(info.agent)
        if setup is not None and info.action == "getSnapshot":
            setup.polled.set()
        return {}

    return AgentServer({name: s.agent for name, s in setups.items()}, base_path=BASE_PATH, context=context)


app = create_server(build())
"""For ``interlock serve interop.app:app`` (run from tests/kit/)."""
