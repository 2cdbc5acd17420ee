"""A signed client-managed state replayed (issue 25): with ``spent_tokens`` the tool runs once.

The tool's runs are counted in an append-only file, so a second run cannot hide. Without the
store, the documented behaviour is pinned: the signature proves the agent handed the state
out, not that it was never used, so each copy runs again (docs/security.md).
"""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
from banking import APPROVE, PAY, Approval, Transfer

from interlock import InMemoryStore, PromptAgent, Resume, ToolContext, ToolRequestPart, tool
from interlock.agents._host import Host
from interlock.errors import UsageError
from interlock.interrupts._replay import pause_nonce
from interlock.interrupts._signing import Keyring
from interlock.records._sessions import SessionState
from interlock.stores.sqlite import SQLiteStore
from interlock.testing import ScriptedModel

KEY = "replay-key-0123456789abcdef0123456789abcdef"


def bank(ledger: pathlib.Path, spent: Any = None, *, pause: bool = False) -> PromptAgent:
    @tool
    async def transfer(req: Transfer, ctx: ToolContext[Any], approval: Approval | None) -> str:
        """Move money once approved."""
        if approval is None:
            ctx.interrupt({"to": req.to})
        with ledger.open("a") as f:  # append-only: every run leaves a line
            f.write(f"{req.to}:{req.amount}\n")
        return "sent"

    model = ScriptedModel([PAY] if pause else ["paid"])  # a fresh agent per request, as a server's process would be
    return PromptAgent(
        "bank", model, tools=[transfer], host=Host(state_signing=Keyring({"k1": KEY}), spent_tokens=spent)
    )


def runs(ledger: pathlib.Path) -> list[str]:
    return ledger.read_text().splitlines() if ledger.exists() else []


async def paused_state(ledger: pathlib.Path, spent: Any = None) -> SessionState:
    out = await bank(ledger, spent, pause=True).run("pay bob 5")
    assert out.finish_reason == "interrupted" and out.state is not None
    return out.state


@pytest.fixture(params=["memory", "sqlite"])
def spent(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Any:
    return InMemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "spent.db")


async def test_the_same_approved_state_sent_twice_runs_the_tool_once(tmp_path: pathlib.Path, spent: Any) -> None:
    ledger = tmp_path / "ledger.txt"
    state = await paused_state(ledger, spent)
    first = await bank(ledger, spent).run(resume=APPROVE, state=state)
    assert first.finish_reason == "stop", first.error
    again = await bank(ledger, spent).run(resume=APPROVE, state=state, raise_on_error=False)
    assert again.error is not None and again.finish_reason == "failed"
    assert (again.error.status, again.error.details) == ("PERMISSION_DENIED", {"reason": "replayed"})
    assert runs(ledger) == ["bob:5.0"]
    # the refused turn's output is the same pause, signed afresh: it is spent all the same
    assert again.state is not None
    third = await bank(ledger, spent).run(resume=APPROVE, state=again.state, raise_on_error=False)
    assert third.error is not None and third.error.details == {"reason": "replayed"}
    assert runs(ledger) == ["bob:5.0"]


async def test_a_refused_answer_spends_nothing_and_another_pause_is_fresh(tmp_path: pathlib.Path) -> None:
    ledger, spent = tmp_path / "ledger.txt", InMemoryStore()
    state = await paused_state(ledger, spent)
    wrong = Resume(
        restart=[
            ToolRequestPart(
                name="transfer", ref="t1", input={"to": "bob", "amount": 5}, metadata={"resumed": {"approved": "yes"}}
            )
        ]
    )
    refused = await bank(ledger, spent).run(resume=wrong, state=state, raise_on_error=False)
    assert refused.error is not None and refused.error.status == "INVALID_ARGUMENT" and runs(ledger) == []
    done = await bank(ledger, spent).run(resume=APPROVE, state=state)  # the state was not spent by the refusal
    assert done.finish_reason == "stop" and runs(ledger) == ["bob:5.0"]
    other = await paused_state(ledger, spent)  # another session's pause has its own nonce
    assert pause_nonce("bank", other) != pause_nonce("bank", state)
    assert (await bank(ledger, spent).run(resume=APPROVE, state=other)).finish_reason == "stop"
    assert runs(ledger) == ["bob:5.0", "bob:5.0"]


async def test_without_the_store_a_signed_state_can_be_replayed(tmp_path: pathlib.Path) -> None:
    """The documented behaviour without ``spent_tokens``: each copy of the approved state runs again."""
    ledger = tmp_path / "ledger.txt"
    state = await paused_state(ledger)
    for _ in range(2):
        out = await bank(ledger).run(resume=APPROVE, state=state)
        assert out.finish_reason == "stop", out.error
    assert runs(ledger) == ["bob:5.0", "bob:5.0"]


def test_spent_tokens_needs_a_signed_client_managed_agent() -> None:
    model = ScriptedModel(["x"])
    with pytest.raises(UsageError, match="state_signing"):
        PromptAgent("a", model, host=Host(spent_tokens=InMemoryStore()))
    with pytest.raises(UsageError, match="client-managed"):
        PromptAgent("a", model, store=InMemoryStore(), host=Host(spent_tokens=InMemoryStore()))
