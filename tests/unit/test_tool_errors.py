"""Tool errors to the model (``tool_errors="model"``): the error text becomes the call's output, with a retry limit."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from interlock import InMemoryStore, Message, PromptAgent
from interlock._engine.loop import generate
from interlock.errors import NotFoundError, PermissionDeniedError, ToolError, ToolInputError
from interlock.parts import Part, ToolRequestPart
from interlock.testing import ScriptedModel
from interlock.tools._tool import tool


class Lookup(BaseModel):
    account: str


def ask(name: str, input: Any, ref: str) -> Message:
    return Message(role="model", content=[ToolRequestPart(name=name, input=input, ref=ref)])


def outputs(messages: list[Message]) -> list[Any]:
    return [r.output for m in messages if m.role == "tool" for r in m.tool_responses]


def make_flaky(failures: int) -> tuple[Any, list[str]]:
    calls: list[str] = []

    @tool
    def balance(q: Lookup) -> str:
        """Read a balance; fails the first ``failures`` times."""
        calls.append(q.account)
        if len(calls) <= failures:
            raise ConnectionError(f"bank offline for {q.account}")
        return f"{q.account}: 100"

    return balance, calls


async def test_a_tool_error_goes_back_to_the_model_which_retries() -> None:
    balance, calls = make_flaky(1)
    model = ScriptedModel([ask("balance", {"account": "main"}, "a"), ask("balance", {"account": "main"}, "b"), "100"])
    result = await generate(model, [Message.user("balance?")], tools=[balance], tool_errors="model")
    assert result.finish_reason == "stop"
    assert result.message.text == "100"
    assert calls == ["main", "main"]
    first, second = outputs(result.messages)
    assert first == {"error": "tool 'balance' failed: bank offline for main"}
    assert second == "main: 100"
    # the model saw the error as the tool's result before it tried again
    seen: list[Part] = model.requests[1].messages[-1].content
    assert [p.kind for p in seen] == ["tool_response"]


async def test_the_default_still_fails_the_turn() -> None:
    balance, calls = make_flaky(1)
    model = ScriptedModel([ask("balance", {"account": "main"}, "a"), "never"])
    with pytest.raises(ToolError, match="bank offline"):
        await generate(model, [Message.user("balance?")], tools=[balance])
    assert calls == ["main"]
    assert len(model.requests) == 1


async def test_an_unknown_tool_name_goes_back_to_the_model_naming_the_tools() -> None:
    balance, calls = make_flaky(0)
    model = ScriptedModel([ask("balanse", {"account": "main"}, "a"), ask("balance", {"account": "main"}, "b"), "ok"])
    result = await generate(model, [Message.user("balance?")], tools=[balance], tool_errors="model")
    assert result.finish_reason == "stop"
    (error, fine) = outputs(result.messages)
    assert "'balanse'" in error["error"] and "balance" in error["error"].split("its tools:")[1]
    assert fine == "main: 100"
    assert calls == ["main"]


async def test_an_unknown_tool_name_fails_the_turn_by_default() -> None:
    balance, _ = make_flaky(0)
    model = ScriptedModel([ask("balanse", {}, "a")])
    with pytest.raises(NotFoundError, match="its tools: balance"):
        await generate(model, [Message.user("balance?")], tools=[balance])


async def test_past_the_retry_limit_the_turn_fails() -> None:
    balance, calls = make_flaky(99)
    script = [ask("balance", {"account": "main"}, str(i)) for i in range(5)]
    model = ScriptedModel(script)
    with pytest.raises(ToolError, match="bank offline"):
        await generate(model, [Message.user("balance?")], tools=[balance], tool_errors="model", tool_retries=2)
    assert len(calls) == 3, "two errors went back to the model; the third failed the turn"
    assert len(model.requests) == 3


async def test_input_errors_follow_tool_errors_unless_set_apart() -> None:
    balance, calls = make_flaky(0)
    model = ScriptedModel([ask("balance", {"acct": "x"}, "a"), "sorry"])
    result = await generate(model, [Message.user("balance?")], tools=[balance], tool_errors="model")
    (error,) = outputs(result.messages)
    assert "'account'" in error["error"]
    model = ScriptedModel([ask("balance", {"acct": "x"}, "a"), "sorry"])
    with pytest.raises(ToolInputError):
        await generate(
            model, [Message.user("balance?")], tools=[balance], tool_errors="model", tool_input_errors="raise"
        )
    assert calls == []


async def test_a_typed_error_the_tool_raises_still_fails_the_turn() -> None:
    @tool
    def guarded(q: Lookup) -> str:
        """Refuses."""
        raise PermissionDeniedError(f"no access to {q.account}")

    model = ScriptedModel([ask("guarded", {"account": "main"}, "a"), "never"])
    with pytest.raises(PermissionDeniedError):
        await generate(model, [Message.user("go")], tools=[guarded], tool_errors="model")


async def test_a_prompt_agent_sends_tool_errors_to_the_model_and_stores_them() -> None:
    balance, calls = make_flaky(1)
    model = ScriptedModel([ask("balance", {"account": "main"}, "a"), ask("balance", {"account": "main"}, "b"), "100"])
    agent = PromptAgent("teller", model, tools=[balance], store=InMemoryStore(), tool_errors="model")
    out = await agent.run("balance?")
    assert out.finish_reason == "stop" and out.error is None
    snap = await agent.get_snapshot(out.snapshot_id)
    assert snap is not None and snap.state is not None
    assert outputs(snap.state.messages) == [{"error": "tool 'balance' failed: bank offline for main"}, "main: 100"]
    assert calls == ["main", "main"]
