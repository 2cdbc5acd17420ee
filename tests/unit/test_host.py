"""The engine's boundary: deployment settings in one validated ``Host``, the tool loop built once per agent."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from interlock import Agent, CustomAgent, InMemoryStore, Message, PromptAgent
from interlock._engine.loop import ToolErrorPolicy, ToolLoop
from interlock.agents._host import Host
from interlock.errors import UsageError
from interlock.interrupts._signing import Keyring
from interlock.interrupts._tokens import TokenSigner
from interlock.parts import ToolRequestPart
from interlock.testing import ScriptedModel
from interlock.tools._tool import tool

DEPLOYMENT = {
    "claim_ttl",
    "heartbeat_interval",
    "state_signing",
    "spent_tokens",
    "resume_tokens",
    "require_resume_tokens",
    "notify",
    "detach_to",
    "state_transform",
    "chunk_transform",
}
KEYS = Keyring({"k1": b"k" * 32})
SIGNER = TokenSigner({"k1": b"t" * 32})


def parameters(cls: Callable[..., Any]) -> set[str]:
    return set(inspect.signature(cls).parameters)


def test_prompt_agent_takes_at_most_twelve_parameters() -> None:
    assert len(inspect.signature(PromptAgent).parameters) <= 12


def test_each_deployment_keyword_is_in_one_constructor_only_host() -> None:
    assert {f.name for f in dataclasses.fields(Host)} == DEPLOYMENT
    for agent in (Agent, CustomAgent, PromptAgent):
        assert parameters(agent) & DEPLOYMENT == set(), agent
        assert "host" in parameters(agent)
    # what the subclasses pass on to Agent is the short list of Agent's own keywords
    assert parameters(Agent) == {"name", "store", "description", "host"}
    assert parameters(CustomAgent) - {"fn"} == parameters(Agent)
    assert parameters(ToolLoop.run) - {"self", "messages"} <= {
        "resume",
        "plan",
        "on_chunk",
        "session",
        "context",
        "reclaimed_from",
        "effects",
    }


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"require_resume_tokens": True}, "require_resume_tokens needs resume_tokens"),
        ({"spent_tokens": InMemoryStore()}, "spent_tokens is for client-managed agents with state_signing"),
        ({"claim_ttl": 0}, r"Host\(claim_ttl=...\) is a number of seconds above 0, got 0"),
        ({"heartbeat_interval": float("nan")}, "heartbeat_interval"),
        ({"claim_ttl": True}, "claim_ttl"),
        ({"claim_ttl": "60"}, "claim_ttl"),
    ],
)
def test_a_host_refuses_settings_that_do_not_go_together(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        Host(**settings)


@pytest.mark.parametrize(
    ("settings", "store", "message"),
    [
        ({"state_signing": KEYS}, True, "state_signing is for client-managed agents"),
        ({"state_signing": KEYS, "spent_tokens": InMemoryStore()}, True, "state_signing is for client-managed"),
        ({"resume_tokens": SIGNER}, False, "resume_tokens are for server-managed agents"),
        ({"notify": True}, False, "notify=True needs a store"),
        ({"detach_to": object()}, False, "detach_to needs a store"),
    ],
)
def test_an_agent_refuses_a_host_that_does_not_fit_its_store(
    settings: dict[str, Any], store: bool, message: str
) -> None:
    host = Host(**settings)
    with pytest.raises(UsageError, match=message):
        PromptAgent("a", ScriptedModel([]), store=InMemoryStore() if store else None, host=host)
    agent = PromptAgent("a", ScriptedModel([]), store=None if store else InMemoryStore(), host=host)
    assert agent.host is host
    with pytest.raises(UsageError, match=message):  # a host assigned later is checked the same way
        PromptAgent("b", ScriptedModel([]), store=InMemoryStore() if store else None).host = host


def test_replacing_a_setting_validates_again() -> None:
    host = Host(resume_tokens=SIGNER, require_resume_tokens=True)
    with pytest.raises(UsageError, match="require_resume_tokens needs resume_tokens"):
        dataclasses.replace(host, resume_tokens=None)


class Lookup(BaseModel):
    account: str


def ask(input: Any, ref: str) -> Message:
    return Message(role="model", content=[ToolRequestPart(name="balance", input=input, ref=ref)])


def flaky(failures: int) -> tuple[Any, list[str]]:
    calls: list[str] = []

    @tool
    def balance(q: Lookup) -> str:
        """Read a balance; fails the first ``failures`` times."""
        calls.append(q.account)
        if len(calls) <= failures:
            raise ConnectionError("bank offline")
        return "100"

    return balance, calls


async def test_a_tool_error_policy_sets_the_mode_the_input_mode_and_the_retries() -> None:
    balance, calls = flaky(99)
    policy = ToolErrorPolicy(on_error="model", retries=1)
    agent = PromptAgent(
        "a", ScriptedModel([ask({"account": "m"}, str(i)) for i in range(4)]), tools=[balance], tool_errors=policy
    )
    out = await agent.run("balance?", raise_on_error=False)
    assert out.error is not None and out.error.status == "INTERNAL" and "bank offline" in out.error.message
    assert len(calls) == 2, "one error went back to the model; the second failed the turn"
    strict_inputs = ToolErrorPolicy(on_error="model", on_input_error="raise")
    agent = PromptAgent(
        "b", ScriptedModel([ask({"acct": "m"}, "a"), "sorry"]), tools=[balance], tool_errors=strict_inputs
    )
    out = await agent.run("balance?", raise_on_error=False)
    assert out.error is not None and out.error.status == "INVALID_ARGUMENT" and "'account'" in out.error.message


async def test_the_tool_loop_is_built_once_and_a_new_model_takes_effect_next_turn() -> None:
    agent = PromptAgent("a", ScriptedModel(["one"]), instructions="Be brief.", store=InMemoryStore())
    loop = agent.loop
    first = await agent.run("hi")
    agent.model = ScriptedModel(["two"])
    second = await agent.run("again", snapshot_id=first.snapshot_id)
    assert agent.loop is loop
    assert second.message is not None and second.message.text == "two"
    assert isinstance(agent.model, ScriptedModel)
    sent = agent.model.requests[0].messages
    assert [m.role for m in sent] == ["system", "user", "model", "user"]  # the instructions lead, unstored
