"""A harness that runs Genkit's cross-language agent spec (shared/spec/agent.yaml) through our public API.

The same harness drives local agents and (in the HTTP tests) remote clients: it needs
only ``connect``, ``get_snapshot`` and ``abort``.
"""

from __future__ import annotations

import asyncio
import pathlib
import re
from collections.abc import Callable
from typing import Any, cast

import yaml
from pydantic import BaseModel

from interlock import (
    AgentResult,
    CustomAgent,
    InMemoryStore,
    InterlockError,
    Message,
    PromptAgent,
    TextPart,
    ToolContext,
    TurnContext,
    interrupt_tool,
    tool,
)
from interlock._engine.invocation import SessionRunner
from interlock._engine.io import AgentInput
from interlock._wire import (
    chunk_to_json,
    init_from_json,
    input_from_json,
    message_from_json,
    model_chunk_from_json,
    output_to_json,
    snapshot_to_json,
)
from interlock.models import ModelResponse
from interlock.records._sessions import Artifact
from interlock.testing import ScriptedModel


def load_cases(shared: pathlib.Path) -> list[dict[str, Any]]:
    data = yaml.safe_load((shared / "spec" / "agent.yaml").read_text())
    return list(data["tests"])


# ----------------------------------------------------------------------------- tools


@tool(name="testTool", description="description")
def test_tool(input: dict[str, Any]) -> str:
    return "tool called"


class Query(BaseModel):
    query: str


class Answer(BaseModel):
    answer: str


interrupt_tool_ = interrupt_tool("interruptTool", input=Query, output=Answer, description="asks the user")


class Action(BaseModel):
    action: str


class ActionResult(BaseModel):
    result: str


@tool(name="restartTool")
def restart_tool(req: Action, ctx: ToolContext[Any]) -> ActionResult:
    """Needs confirmation before it runs."""
    if not ctx.is_resumed:
        ctx.interrupt({"requiresConfirmation": True})
    return ActionResult(result=f"confirmed: {req.action}")


# ----------------------------------------------------------------------------- custom agents


async def _blocking(runner: SessionRunner) -> AgentResult | None:
    async def turn(_: AgentInput, __: TurnContext) -> None:
        await runner.aborted.wait()

    await runner.run(turn)
    return None


async def _failing(runner: SessionRunner) -> AgentResult | None:
    async def turn(_: AgentInput, __: TurnContext) -> None:
        raise RuntimeError("intentional failure")

    await runner.run(turn)
    return None


async def _artifacts(runner: SessionRunner) -> AgentResult | None:
    async def turn(_: AgentInput, __: TurnContext) -> None:
        s = runner.session
        s.add_artifacts(Artifact(name="doc1", parts=[TextPart(text="v1")]))
        s.add_artifacts(Artifact(name="doc1", parts=[TextPart(text="v2")]))
        s.add_artifacts(Artifact(name="doc2", parts=[TextPart(text="other")]))

    await runner.run(turn)
    return AgentResult(message=Message.model("done"), artifacts=runner.session.artifacts)


def _counter(custom: Any) -> dict[str, Any]:
    custom = dict(custom or {})
    custom["counter"] = int(custom.get("counter", 0)) + 1
    return custom


async def _custom_state(runner: SessionRunner) -> AgentResult | None:
    async def turn(_: AgentInput, __: TurnContext) -> None:
        runner.session.update_custom(_counter)

    await runner.run(turn)
    return AgentResult(message=Message.model("done"))


async def _multi_custom_state(runner: SessionRunner) -> AgentResult | None:
    async def turn(_: AgentInput, __: TurnContext) -> None:
        runner.session.set_custom({"counter": 1, "status": "working"})
        runner.session.update_custom(lambda c: {**c, "counter": 2})
        runner.session.update_custom(lambda c: {**c, "status": "done"})

    await runner.run(turn)
    return AgentResult(message=Message.model("done"))


async def _artifacts_store(runner: SessionRunner) -> AgentResult | None:
    async def turn(_: AgentInput, __: TurnContext) -> None:
        n = sum(1 for m in runner.session.messages if m.role == "user")
        runner.session.add_artifacts(Artifact(name=f"doc{n}", parts=[TextPart(text=f"content{n}")]))

    await runner.run(turn)
    return AgentResult(artifacts=runner.session.artifacts)


def build_agents(store_factory: Callable[[], Any] = InMemoryStore) -> dict[str, Any]:
    """The agents the spec names, each with a fresh store."""
    model = ScriptedModel()
    cfg = {"temperature": 1}
    return {
        "promptAgent": PromptAgent("promptAgent", model, config=cfg),
        "promptAgentWithStore": PromptAgent("promptAgentWithStore", model, config=cfg, store=store_factory()),
        "promptAgentWithTools": PromptAgent("promptAgentWithTools", model, config=cfg, tools=[test_tool]),
        "promptAgentWithInterrupt": PromptAgent(
            "promptAgentWithInterrupt", model, config=cfg, tools=[interrupt_tool_], store=store_factory()
        ),
        "promptAgentWithRestartTool": PromptAgent(
            "promptAgentWithRestartTool", model, config=cfg, tools=[restart_tool], store=store_factory()
        ),
        "customAgentBlocking": CustomAgent("customAgentBlocking", _blocking, store=store_factory()),
        "customAgentFailing": CustomAgent("customAgentFailing", _failing, store=store_factory()),
        "customAgentWithArtifacts": CustomAgent("customAgentWithArtifacts", _artifacts),
        "customAgentWithCustomState": CustomAgent("customAgentWithCustomState", _custom_state),
        "customAgentWithMultiCustomState": CustomAgent("customAgentWithMultiCustomState", _multi_custom_state),
        "customAgentWithArtifactsStore": CustomAgent(
            "customAgentWithArtifactsStore", _artifacts_store, store=store_factory()
        ),
        "customAgentWithCustomStateStore": CustomAgent(
            "customAgentWithCustomStateStore", _custom_state, store=store_factory()
        ),
    }


def script_model(step: dict[str, Any]) -> ScriptedModel:
    replies: list[dict[str, Any]] = step.get("modelResponses") or []
    batches: list[list[Any]] = step.get("streamChunks") or []
    responses = [
        ModelResponse(message=message_from_json(r["message"]), finish_reason=r.get("finishReason", "stop"))
        for r in replies
    ]
    chunks = [[model_chunk_from_json(c) for c in batch] for batch in batches]
    return ScriptedModel(responses, chunks=chunks)


# ----------------------------------------------------------------------------- assertions


def contains(actual: Any, expected: Any, path: str = "$") -> None:
    """Subset match: objects by key, arrays as ordered subsequences, scalars exactly."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{path}: expected an object, got {actual!r}"
        got = cast(dict[str, Any], actual)
        for key, value in cast(dict[str, Any], expected).items():
            assert key in got, f"{path}: missing key {key!r} in {got!r}"
            contains(got[key], value, f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list), f"{path}: expected a list, got {actual!r}"
        items = cast(list[Any], actual)
        i = 0
        for n, item in enumerate(cast(list[Any], expected)):
            while i < len(items) and not _matches(items[i], item):
                i += 1
            assert i < len(items), f"{path}[{n}]: {item!r} not found in order in {items!r}"
            i += 1
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def _matches(actual: Any, expected: Any) -> bool:
    try:
        contains(actual, expected)
    except AssertionError:
        return False
    return True


def check_chunks(chunks: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    assert len(chunks) == len(expected), f"expected {len(expected)} chunks, got {chunks!r}"
    for got, want in zip(chunks, expected, strict=True):
        if "turnEnd" in want:
            assert "turnEnd" in got, f"expected turnEnd, got {got!r}"
            wanted: dict[str, Any] = want["turnEnd"] or {}
            if wanted.get("finishReason"):
                assert got["turnEnd"].get("finishReason") == want["turnEnd"]["finishReason"]
        else:
            contains(got, want)


def check_output(output: dict[str, Any], expected: dict[str, Any]) -> None:
    for key, want in expected.items():
        if key == "hasSessionId":
            state: dict[str, Any] = output.get("state") or {}
            sid: Any = state.get("sessionId") or output.get("sessionId")
            assert bool(sid) == want, f"sessionId presence: {output!r}"
        elif key == "hasSnapshotId":
            assert bool(output.get("snapshotId")) == want, f"snapshotId presence: {output!r}"
        elif key == "stateContains":
            contains(output.get("state"), want, "$.state")
        elif key == "artifactsContain":
            contains(output.get("artifacts"), want, "$.artifacts")
        elif key == "errorContains":
            error: dict[str, Any] = output.get("error") or {}
            if "status" in want:
                assert error.get("status") == want["status"], f"error: {error!r}"
            assert want.get("message", "") in error.get("message", ""), f"error: {error!r}"
        else:
            contains(output.get(key), want, f"$.{key}")


def check_snapshot(snap: dict[str, Any] | None, expected: dict[str, Any]) -> None:
    assert snap is not None, "snapshot not found"
    for key, want in expected.items():
        if key == "hasSessionId":
            snap_state: dict[str, Any] = snap.get("state") or {}
            assert bool(snap_state.get("sessionId")) == want
        elif key == "stateContains":
            contains(snap.get("state"), want, "$.state")
        elif key == "errorContains":
            contains(snap.get("error"), want, "$.error")
        else:
            assert snap.get(key) == want, f"snapshot {key}: {snap.get(key)!r} != {want!r}"


# ----------------------------------------------------------------------------- the runner

_TEMPLATE = re.compile(r"\{\{(\w+)\}\}")


def substitute(value: Any, captured: dict[str, Any]) -> Any:
    if isinstance(value, str):
        whole = _TEMPLATE.fullmatch(value)
        if whole:
            return captured[whole.group(1)]
        return _TEMPLATE.sub(lambda m: str(captured[m.group(1)]), value)
    if isinstance(value, dict):
        return {k: substitute(v, captured) for k, v in cast(dict[str, Any], value).items()}
    if isinstance(value, list):
        return [substitute(v, captured) for v in cast(list[Any], value)]
    return value


async def run_case(
    case: dict[str, Any], agents: dict[str, Any], *, set_model: Callable[[Any, ScriptedModel], None]
) -> None:
    agent = agents[case["agent"]]
    captured: dict[str, Any] = {}
    for step in case["steps"]:
        step = substitute(step, captured)
        kind = step["type"]
        if kind == "send":
            await _send(agent, step, captured, set_model)
        elif kind == "getSnapshotData":
            snap = await agent.get_snapshot(step.get("snapshotId"), session_id=step.get("sessionId"))
            check_snapshot(snapshot_to_json(snap), step.get("expectSnapshot") or {})
        elif kind == "abort":
            previous = await agent.abort(step["snapshotId"])
            assert previous == step.get("expectPreviousStatus"), f"abort returned {previous!r}"
        elif kind == "waitUntilCompleted":
            snap_json = await _wait(agent, step["snapshotId"], step.get("timeoutMs", 5000) / 1000)
            check_snapshot(snap_json, step.get("expectSnapshot") or {})
        else:
            raise AssertionError(f"unknown step type {kind!r}")


async def _wait(agent: Any, snapshot_id: str, timeout: float) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        snap = await agent.get_snapshot(snapshot_id)
        if snap.status in ("completed", "failed", "aborted"):
            return snapshot_to_json(snap)
        assert loop.time() < deadline, f"snapshot {snapshot_id} did not complete in {timeout} s"
        await asyncio.sleep(0.02)


async def _send(
    agent: Any, step: dict[str, Any], captured: dict[str, Any], set_model: Callable[[Any, ScriptedModel], None]
) -> None:
    set_model(agent, script_model(step))
    init = init_from_json(step.get("init") or {})
    conn = agent.connect(snapshot_id=init.snapshot_id, session_id=init.session_id, state=init.state)
    inputs: list[Any] = step.get("inputs") or []
    for raw in inputs:
        await conn.send(input_from_json(raw))
    await conn.close()
    chunks = [chunk_to_json(c) async for c in conn]
    if "expectError" in step:
        want = step["expectError"]
        try:
            await conn.output()
        except InterlockError as exc:
            assert exc.status == want["status"], f"status {exc.status} != {want['status']}"
            assert want.get("message", "") in str(exc), f"{str(exc)!r} lacks {want.get('message')!r}"
            return
        raise AssertionError(f"expected an error {want!r}")
    output = output_to_json(await conn.output())
    if "expectChunks" in step:
        check_chunks(chunks, step["expectChunks"])
    check_output(output, step.get("expectOutput") or {})
    if "captureSnapshotId" in step:
        captured[step["captureSnapshotId"]] = output.get("snapshotId")
    if "captureState" in step:
        captured[step["captureState"]] = output.get("state")
    if "captureSessionId" in step:
        captured[step["captureSessionId"]] = output.get("sessionId")
