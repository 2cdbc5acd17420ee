"""Resume tokens (issue 12, item 2): every refusal is PERMISSION_DENIED, runs nothing, and changes no stored row.

The bank pauses a transfer for approval; the agent mints a token into the interrupt and
requires it back. Each refusal test counts the tool's executions and compares every
stored row (snapshots and the effect journal) before and after.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from typing import Any

import pytest
from banking import PAY, Approval, Transfer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from where import ROOT

from interlock import (
    Inbox,
    InMemoryStore,
    Message,
    PromptAgent,
    Resume,
    SessionStore,
    Snapshot,
    ToolContext,
    ToolRequestPart,
    ToolResponsePart,
    tool,
)
from interlock import metadata as md
from interlock._engine.commit import consumed_tokens
from interlock.agents._host import Host
from interlock.errors import PermissionDeniedError, UsageError
from interlock.interrupts._decisions import Decision
from interlock.interrupts._plan import PlannedCall, ResumePlan
from interlock.interrupts._tokens import TokenSigner, check_tokens, id_digest
from interlock.records._sessions import SessionState
from interlock.testing import ScriptedModel
from interlock.tools._middleware import approve as approve_hold
from interlock.tools._middleware import deny as deny_hold
from interlock.tools._tool import interrupt_tool

K1, K2, K9 = b"1" * 32, b"2" * 32, b"9" * 32
APPROVED = Decision.restart({"approved": True})


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def bank(
    store: SessionStore,
    runs: list[str],
    script: list[Any],
    *,
    signer: TokenSigner | None = None,
    require: bool = True,
    name: str = "bank",
    **options: Any,
) -> PromptAgent:
    @tool
    async def transfer(req: Transfer, ctx: ToolContext[Any], approval: Approval | None) -> str:
        """Move money once approved."""
        if approval is None:
            ctx.interrupt({"to": req.to})
        runs.append(req.to)
        return "sent"

    ask = interrupt_tool("ask", output=str)
    return PromptAgent(
        name,
        ScriptedModel(script),
        tools=[transfer, ask],
        store=store,
        **options,
        host=Host(resume_tokens=signer or TokenSigner({"k1": K1}), require_resume_tokens=require),
    )


def _missing(sid: str) -> Any:
    raise AssertionError(f"snapshot {sid} is missing")


async def rows(store: InMemoryStore) -> tuple[list[Snapshot | None], list[Any]]:
    snaps = [await store.load(i.snapshot_id) for i in await store.list()]
    return sorted(snaps, key=lambda s: s.snapshot_id if s else ""), await store.journal_entries()


async def paused(agent: PromptAgent, text: str = "pay bob 5") -> tuple[str, list[ToolRequestPart]]:
    out = await agent.run(text)
    assert out.finish_reason == "interrupted" and out.snapshot_id and out.message, out.error
    return out.snapshot_id, out.message.interrupts


def with_token(entry: ToolRequestPart, token: object) -> ToolRequestPart:
    meta = {k: v for k, v in (entry.metadata or {}).items() if k != md.RESUME_TOKEN}
    return replace(entry, metadata=meta if token is None else {**meta, md.RESUME_TOKEN: token})


def restart(part: ToolRequestPart, token: object = ..., decision: Decision = APPROVED) -> Resume:
    entry = decision.answer(part)
    assert isinstance(entry, ToolRequestPart)
    return Resume(restart=[entry if token is ... else with_token(entry, token)])


async def assert_refused(
    store: InMemoryStore, runs: list[str], agent: PromptAgent, resume: Resume, reason: str, **where: Any
) -> str:
    before, ran = await rows(store), list(runs)
    out = await agent.run(resume=resume, **where, raise_on_error=False)
    assert out.error is not None and out.error.status == "PERMISSION_DENIED", out
    assert out.error.details == {"reason": reason}, out.error
    assert runs == ran, "a refused resume ran a tool"
    assert await rows(store) == before, "a refused resume changed the store"
    return out.error.message


async def assert_answered(
    store: InMemoryStore, runs: list[str], agent: PromptAgent, resume: Resume, winner: str, **where: Any
) -> str:
    """A resume with a valid but spent token: ABORTED naming the answer that spent it; nothing runs or changes."""
    before, ran = await rows(store), list(runs)
    out = await agent.run(resume=resume, **where, raise_on_error=False)
    assert out.error is not None and out.error.status == "ABORTED", out
    assert out.error.details == {"winner": winner} and f"already resumed by turn {winner}" in out.error.message
    assert runs == ran, "a second answer ran a tool"
    assert await rows(store) == before, "a second answer changed the store"
    return out.error.message


# minting and the happy path ------------------------------------------------------------------


async def test_each_interrupt_carries_a_token_the_answer_spends_once() -> None:
    store, runs = InMemoryStore(), list[str]()
    agent = bank(store, runs, [PAY, "paid"])
    sid, [part] = await paused(agent)
    token = md.resume_token(part)
    assert token and token.startswith("it1.") and len(token) < 400
    snap = await store.load(sid)
    assert snap is not None and [md.resume_token(p) for p in snap.interrupts] == [token]
    assert [md.resume_token(p) for p in await agent.pending_interrupts(sid)] == [token]
    assert sid not in token and snap.session_id not in token  # ids ride as digests
    out = await agent.run(resume=restart(part), snapshot_id=sid)
    assert out.finish_reason == "stop", out.error
    assert runs == ["bob"]
    answered = await store.load(sid)
    nonce = TokenSigner({"k1": K1}).read(token).nonce
    assert answered is not None and consumed_tokens(answered) == [nonce]


async def test_typed_answers_and_approvals_copy_the_token() -> None:
    store, runs = InMemoryStore(), list[str]()
    agent = bank(store, runs, [PAY])
    _, [part] = await paused(agent)
    transfer = agent.tools[0]
    claimed = transfer.interrupted(part)
    assert claimed is not None
    token = md.resume_token(part)
    assert md.resume_token(claimed.respond("sent")) == token
    assert md.resume_token(claimed.restart(Approval(approved=True))) == token
    assert md.resume_token(Decision.deny("no").answer(part)) == token
    assert md.resume_token(approve_hold(part)) == md.resume_token(deny_hold(part)) == token


async def test_without_require_a_missing_token_passes_and_a_present_one_is_checked() -> None:
    store, runs = InMemoryStore(), list[str]()
    agent = bank(store, runs, [PAY, "paid"], require=False)
    sid, [part] = await paused(agent)
    await assert_refused(store, runs, agent, restart(part, "it1.forged"), "malformed", snapshot_id=sid)
    out = await agent.run(resume=restart(part, None), snapshot_id=sid)
    assert out.finish_reason == "stop" and runs == ["bob"]


def test_options_are_refused_where_they_cannot_work() -> None:
    with pytest.raises(UsageError, match="server-managed"):
        PromptAgent("a", ScriptedModel(), host=Host(resume_tokens=TokenSigner({"k1": K1})))
    with pytest.raises(UsageError, match="needs resume_tokens"):
        PromptAgent("a", ScriptedModel(), store=InMemoryStore(), host=Host(require_resume_tokens=True))
    with pytest.raises(UsageError, match="ttl"):
        TokenSigner({"k1": K1}, ttl=0)


# refusals ------------------------------------------------------------------------------------


async def test_a_missing_token_is_refused() -> None:
    store, runs = InMemoryStore(), list[str]()
    agent = bank(store, runs, [PAY, "paid"])
    sid, [part] = await paused(agent)
    message = await assert_refused(store, runs, agent, restart(part, None), "missing", snapshot_id=sid)
    assert "carries no resume token" in message and md.RESUME_TOKEN in message


def _flip(text: str, i: int) -> str:
    return text[:i] + ("A" if text[i] != "A" else "B") + text[i + 1 :]


def _mangle(token: str, how: str) -> object:
    head, payload, version, kid, issued, mac = token.split(".")
    return {
        "truncated": token[:-6],
        "cut to three pieces": ".".join((head, payload, version)),
        "padded payload": ".".join((head, payload + "==", version, kid, issued, mac)),
        "padded signature": token + "=",
        "standard base64 signature": token[:-1] + ("+" if token[-1] != "+" else "/"),
        "leading zero issued": ".".join((head, payload, version, kid, "0" + issued, mac)),
        "unicode digits": ".".join((head, payload, version, kid, "\u0661" * len(issued), mac)),
        "flipped payload": ".".join((head, _flip(payload, 5), version, kid, issued, mac)),
        "another version": ".".join((head, payload, "v2", kid, issued, mac)),
        "not a string": 12345,
        "empty": "",
    }[how]


@pytest.mark.parametrize(
    ("how", "reason"),
    [
        ("truncated", "tampered"),
        ("cut to three pieces", "malformed"),
        ("padded payload", "tampered"),
        ("padded signature", "tampered"),
        ("standard base64 signature", "tampered"),
        ("leading zero issued", "malformed"),
        ("unicode digits", "malformed"),
        ("flipped payload", "tampered"),
        ("another version", "malformed"),
        ("not a string", "malformed"),
        ("empty", "malformed"),
    ],
)
async def test_a_tampered_or_malformed_token_is_refused(how: str, reason: str) -> None:
    store, runs = InMemoryStore(), list[str]()
    agent = bank(store, runs, [PAY, "paid"])
    sid, [part] = await paused(agent)
    token = md.resume_token(part)
    assert token is not None
    await assert_refused(store, runs, agent, restart(part, _mangle(token, how)), reason, snapshot_id=sid)


async def test_a_token_rebound_to_this_snapshot_without_the_key_is_tampered() -> None:
    store, runs = InMemoryStore(), list[str]()
    agent = bank(store, runs, [PAY, "paid"])
    sid, [part] = await paused(agent)
    forger = TokenSigner({"k1": K9})  # right key id, wrong secret
    snap = await store.load(sid)
    assert snap is not None
    forged = forger.mint(
        agent="bank", session_id=snap.session_id, snapshot_id=sid, part=part, decisions=("respond", "restart", "edit")
    )
    await assert_refused(store, runs, agent, restart(part, forged), "tampered", snapshot_id=sid)


async def test_a_token_of_an_unknown_key_is_refused() -> None:
    store, runs = InMemoryStore(), list[str]()
    agent = bank(store, runs, [PAY, "paid"])
    sid, [part] = await paused(agent)
    snap = await store.load(sid)
    assert snap is not None
    stranger = TokenSigner({"k9": K9}).mint(
        agent="bank", session_id=snap.session_id, snapshot_id=sid, part=part, decisions=("restart",)
    )
    message = await assert_refused(store, runs, agent, restart(part, stranger), "unknown-key", snapshot_id=sid)
    assert "'k9'" in message and "retired" in message


async def test_an_expired_token_is_refused() -> None:
    store, runs, clock = InMemoryStore(), list[str](), Clock()
    agent = bank(store, runs, [PAY, "paid"], signer=TokenSigner({"k1": K1}, ttl=60, clock=clock))
    sid, [part] = await paused(agent)
    clock.now += 61
    message = await assert_refused(store, runs, agent, restart(part), "expired", snapshot_id=sid)
    assert "expired at" in message
    clock.now -= 2  # still valid 59 s after minting
    assert (await agent.run(resume=restart(part), snapshot_id=sid)).finish_reason == "stop" and runs == ["bob"]


async def test_a_token_from_another_session_is_refused() -> None:
    store, runs = InMemoryStore(), list[str]()
    agent = bank(store, runs, [PAY, PAY])
    mine, [part] = await paused(agent)
    _, [theirs] = await paused(agent, "pay bob 5 again")
    stolen = md.resume_token(theirs)
    await assert_refused(store, runs, agent, restart(part, stolen), "other-session", snapshot_id=mine)


async def test_a_token_from_an_older_snapshot_of_the_session_is_refused_and_a_replay_is_told_who_answered() -> None:
    store, runs = InMemoryStore(), list[str]()
    agent = bank(store, runs, [PAY, PAY, "paid"])  # the answered turn asks for the same transfer again
    first, [old] = await paused(agent)
    again = await agent.run(resume=restart(old), snapshot_id=first)
    assert again.finish_reason == "interrupted" and again.snapshot_id and again.message and runs == ["bob"]
    [new] = again.message.interrupts
    assert (new.name, new.ref) == (old.name, old.ref) and md.resume_token(new) != md.resume_token(old)
    older = md.resume_token(old)
    await assert_refused(store, runs, agent, restart(new, older), "other-snapshot", snapshot_id=again.snapshot_id)
    session = (await store.load(first) or Snapshot(snapshot_id="", session_id="")).session_id
    await assert_refused(store, runs, agent, restart(new, older), "other-snapshot", session_id=session)
    await assert_answered(store, runs, agent, restart(old), again.snapshot_id, snapshot_id=first)  # not replayed
    forged = restart(old, (md.resume_token(old) or "")[:-2])  # still checked first: a bad token is refused as such
    await assert_refused(store, runs, agent, forged, "tampered", snapshot_id=first)


async def test_a_replay_by_session_id_is_told_who_answered_once_its_token_is_checked() -> None:
    store, runs = InMemoryStore(), list[str]()
    agent = bank(store, runs, [PAY, "paid"])
    sid, [part] = await paused(agent)
    done = await agent.run(resume=restart(part), snapshot_id=sid)
    session = done.session_id
    assert done.finish_reason == "stop" and done.snapshot_id and session and runs == ["bob"]
    await assert_answered(store, runs, agent, restart(part), done.snapshot_id, session_id=session)
    token = md.resume_token(part) or ""
    await assert_refused(store, runs, agent, restart(part, token[:-2]), "tampered", session_id=session)
    await assert_refused(store, runs, agent, restart(part, None), "missing", session_id=session)


async def test_a_token_for_another_call_of_the_turn_is_refused() -> None:
    store, runs = InMemoryStore(), list[str]()
    two = Message(
        role="model",
        content=[
            ToolRequestPart(name="transfer", ref="t1", input={"to": "bob", "amount": 5}),
            ToolRequestPart(name="transfer", ref="t2", input={"to": "eve", "amount": 7}),
            ToolRequestPart(name="ask", ref="a1", input={"q": "why?"}),
        ],
    )
    agent = bank(store, runs, [two, "paid"])
    sid, [t1, t2, a1] = await paused(agent)

    def answers(tokens: dict[str, object]) -> Resume:
        entries = [restart(p).restart[0] for p in (t1, t2)]
        reply = Decision.respond("because").answer(a1)
        assert isinstance(reply, ToolResponsePart)
        swapped = [with_token(e, tokens.get(e.ref or "", md.resume_token(e))) for e in entries]
        token = tokens.get("a1", md.resume_token(reply))
        return Resume(
            restart=swapped, respond=[replace(reply, metadata={**(reply.metadata or {}), md.RESUME_TOKEN: token})]
        )

    m = await assert_refused(
        store, runs, agent, answers({"t1": md.resume_token(t2)}), "other-interrupt", snapshot_id=sid
    )
    assert "transfer#t2, not for transfer#t1" in m
    m = await assert_refused(
        store, runs, agent, answers({"a1": md.resume_token(t1)}), "other-interrupt", snapshot_id=sid
    )
    assert "transfer#t1, not for ask#a1" in m
    out = await agent.run(resume=answers({}), snapshot_id=sid)
    assert out.finish_reason == "stop", out.error
    assert sorted(runs) == ["bob", "eve"]


async def test_a_decision_the_token_does_not_allow_is_refused() -> None:
    store, runs = InMemoryStore(), list[str]()
    ask = Message(role="model", content=[ToolRequestPart(name="ask", ref="a1", input={"q": "why?"})])
    agent = bank(store, runs, [ask, "ok"])
    sid, [part] = await paused(agent)
    # a restart of an interrupt-only tool is refused by validation first (INVALID_ARGUMENT, saying respond) ...
    before = await rows(store)
    out = await agent.run(resume=restart(part, decision=Decision.restart()), snapshot_id=sid, raise_on_error=False)
    assert out.error is not None and out.error.status == "INVALID_ARGUMENT" and "respond" in out.error.message
    assert runs == [] and await rows(store) == before
    # ... and the token, which allows only respond for it, refuses it too
    plan = ResumePlan(resume=Resume(), calls=(PlannedCall(index=0, request=part, verb="restart", restart=part),))
    with pytest.raises(PermissionDeniedError, match=r"does not allow restart \(it allows respond\)"):
        check_tokens(agent, plan, session_id=(await store.load(sid) or _missing(sid)).session_id, snapshot_id=sid)


async def test_an_edited_input_is_refused_unless_the_token_allows_edit() -> None:
    store, runs = InMemoryStore(), list[str]()
    strict = bank(store, runs, [PAY])
    sid, [part] = await paused(strict)
    lenient = bank(store, runs, ["paid"], allow_replaced_input=True)  # the policy widened after minting
    edit = Decision.restart({"approved": True}, input={"to": "mallory", "amount": 1_000_000})
    await assert_refused(store, runs, lenient, restart(part, decision=edit), "edited", snapshot_id=sid)

    store2, runs2 = InMemoryStore(), list[str]()
    editable = bank(store2, runs2, [PAY, "paid"], allow_replaced_input=True)
    sid2, [part2] = await paused(editable)
    out = await editable.run(resume=restart(part2, decision=edit), snapshot_id=sid2)
    assert out.finish_reason == "stop", out.error
    assert runs2 == ["mallory"]


async def test_a_token_minted_by_another_agent_is_refused() -> None:
    store, runs = InMemoryStore(), list[str]()
    agent = bank(store, runs, [PAY])
    sid, [part] = await paused(agent)
    snap = await store.load(sid)
    assert snap is not None
    other = TokenSigner({"k1": K1}).mint(
        agent="ops", session_id=snap.session_id, snapshot_id=sid, part=part, decisions=("restart",)
    )
    await assert_refused(store, runs, agent, restart(part, other), "other-agent", snapshot_id=sid)


# single use ----------------------------------------------------------------------------------


async def test_a_resume_that_failed_before_committing_leaves_its_token_usable() -> None:
    store, runs = InMemoryStore(), list[str]()

    def down(_: Any) -> Any:
        raise RuntimeError("model unavailable")

    agent = bank(store, runs, [PAY, down, "paid"])
    sid, [part] = await paused(agent)
    failed = await agent.run(resume=restart(part), snapshot_id=sid, raise_on_error=False)
    assert failed.error is not None and runs == ["bob"]
    after = await store.load(sid)
    assert after is not None and consumed_tokens(after) == []
    done = await agent.run(resume=restart(part), snapshot_id=sid)
    assert done.finish_reason == "stop", done.error
    assert runs == ["bob"]  # the journal replayed the transfer
    await assert_answered(store, runs, agent, restart(part), done.snapshot_id or "", snapshot_id=sid)


async def test_an_aborted_detached_resume_leaves_its_token_usable() -> None:
    store, runs = InMemoryStore(), list[str]()
    thinking = asyncio.Event()

    async def slow(_: Any) -> Any:
        thinking.set()
        await asyncio.sleep(30)
        raise AssertionError("the aborted run went on")

    agent = bank(store, runs, [PAY, slow, "paid"])
    sid, [part] = await paused(agent)
    out = await agent.run(resume=restart(part), snapshot_id=sid, detach=True)
    assert out.finish_reason == "detached" and out.snapshot_id
    await asyncio.wait_for(thinking.wait(), 5)  # the tool ran; the model is thinking
    assert await agent.abort(out.snapshot_id) == "pending"
    await asyncio.sleep(0.05)
    after = await store.load(sid)
    assert after is not None and consumed_tokens(after) == [] and not after.claimed_by
    done = await agent.run(resume=restart(part), snapshot_id=sid)
    assert done.finish_reason == "stop", done.error
    assert runs == ["bob"]


async def test_racing_resumes_with_one_token_run_it_once() -> None:
    store, runs = InMemoryStore(), list[str]()
    agent = bank(store, runs, [PAY, *["paid"] * 8])
    sid, [part] = await paused(agent)
    outs = await asyncio.gather(
        *(agent.run(resume=restart(part), snapshot_id=sid, raise_on_error=False) for _ in range(8))
    )
    [won] = [o for o in outs if o.finish_reason == "stop"]
    assert [o.error.details for o in outs if o.error] == [{"winner": won.snapshot_id}] * 7  # every loser: who won
    assert runs == ["bob"]


# key rotation --------------------------------------------------------------------------------


async def test_a_previous_key_verifies_while_listed_and_is_refused_after_removal() -> None:
    store, runs = InMemoryStore(), list[str]()
    old = bank(store, runs, [PAY, PAY])
    sid, [part] = await paused(old)
    sid2, [part2] = await paused(old, "pay bob 5 again")
    rotated = TokenSigner({"k1": K1, "k2": K2}, signing="k2")
    during = bank(store, runs, ["paid", PAY], signer=rotated)
    assert (await during.run(resume=restart(part), snapshot_id=sid)).finish_reason == "stop"
    assert runs == ["bob"]
    _, [fresh] = await paused(during, "pay bob 5 a third time")
    assert ".k2." in (md.resume_token(fresh) or "")
    after = bank(store, runs, ["paid"], signer=TokenSigner({"k2": K2}))
    await assert_refused(store, runs, after, restart(part2), "unknown-key", snapshot_id=sid2)


# over HTTP, the inbox, detached turns ------------------------------------------------------------


async def test_over_http_the_token_travels_and_is_checked() -> None:
    from http_helpers import serve

    from interlock import AgentServer, RemoteAgent

    store, runs = InMemoryStore(), list[str]()
    agent = bank(store, runs, [PAY, "paid"])
    async with serve(AgentServer([agent])) as base, RemoteAgent(f"{base}/bank") as remote:
        out = await remote.run("pay bob 5")
        assert out.snapshot_id and out.message
        [part] = out.message.interrupts
        token = md.resume_token(part)
        assert token and [md.resume_token(p) for p in await remote.pending_interrupts(out.snapshot_id)] == [token]
        before = await rows(store)
        bare = await remote.run(resume=restart(part, None), snapshot_id=out.snapshot_id, raise_on_error=False)
        assert bare.error is not None and bare.error.status == "PERMISSION_DENIED"
        forged = await remote.run(resume=restart(part, token[:-2]), snapshot_id=out.snapshot_id, raise_on_error=False)
        assert forged.error is not None and forged.error.status == "PERMISSION_DENIED"
        assert await rows(store) == before and runs == []
        done = await remote.run(resume=restart(part), snapshot_id=out.snapshot_id)
        assert done.finish_reason == "stop", done.error
        replay = await remote.run(resume=restart(part), snapshot_id=out.snapshot_id, raise_on_error=False)
        assert replay.error is not None and replay.error.status == "ABORTED"  # the spent token's answer won
        assert replay.error.details == {"winner": done.snapshot_id}
    assert runs == ["bob"]


async def test_theanswers_with_the_token() -> None:
    store, runs = InMemoryStore(), list[str]()
    agent = bank(store, runs, [PAY, "paid"])
    sid, [part] = await paused(agent)
    inbox = Inbox(store, agents=[agent])
    [item] = await inbox.pending()
    assert md.resume_token(item.part) == md.resume_token(part)
    out = await inbox.approve(sid)
    assert out.finish_reason == "stop", out.error
    assert runs == ["bob"]
    answered = await store.load(sid)
    assert answered is not None and len(consumed_tokens(answered)) == 1


async def test_a_detached_turn_that_pauses_mints_tokens_for_its_own_row() -> None:
    store, runs = InMemoryStore(), list[str]()
    agent = bank(store, runs, [PAY, "paid"])
    out = await agent.run("pay bob 5", detach=True)
    assert out.finish_reason == "detached" and out.snapshot_id
    snap = await agent.wait(out.snapshot_id, timeout=5)
    assert snap is not None and snap.finish_reason == "interrupted"
    [part] = snap.interrupts
    assert isinstance(part, ToolRequestPart)
    token = TokenSigner({"k1": K1}).read(md.resume_token(part))
    assert token.snapshot_id == id_digest(out.snapshot_id)
    done = await agent.run(resume=restart(part), snapshot_id=out.snapshot_id)
    assert done.finish_reason == "stop", done.error
    assert runs == ["bob"]


# no accepted forgery -------------------------------------------------------------------------


_FUZZ: dict[str, Any] = {}


def _fuzz_case() -> tuple[PromptAgent, ToolRequestPart, list[Message], str, str]:
    """One paused bank (built once): the agent, the interrupt, the history, its session and snapshot ids."""
    if not _FUZZ:

        async def build() -> None:
            store = InMemoryStore()
            agent = bank(store, [], [PAY])
            sid, [part] = await paused(agent)
            snap = await store.load(sid)
            assert snap is not None and snap.state is not None
            _FUZZ.update(agent=agent, part=part, state=snap.state, session=snap.session_id, sid=sid)

        asyncio.run(build())
    state: SessionState = _FUZZ["state"]
    return _FUZZ["agent"], _FUZZ["part"], state.messages, _FUZZ["session"], _FUZZ["sid"]


def _plan_with(agent: PromptAgent, part: ToolRequestPart, history: list[Message], token: object) -> ResumePlan:
    return agent.check_resume(restart(part, token), history)


_ALPHABET = st.sampled_from("abcXYZ019-_.=+/ \u0661")


@st.composite
def _mutations(draw: st.DrawFn) -> str:
    _, part, _, _, _ = _fuzz_case()
    token = md.resume_token(part) or ""
    chars = list(token)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["replace", "delete", "insert", "truncate", "swap-piece"]))
        i = draw(st.integers(0, max(0, len(chars) - 1)))
        if op == "replace" and chars:
            chars[i] = draw(_ALPHABET)
        elif op == "delete" and chars:
            del chars[i]
        elif op == "insert":
            chars.insert(i, draw(_ALPHABET))
        elif op == "truncate":
            chars = chars[:i]
        else:
            pieces = "".join(chars).split(".")
            j, k = draw(st.integers(0, len(pieces) - 1)), draw(st.integers(0, len(pieces) - 1))
            pieces[j], pieces[k] = pieces[k], pieces[j]
            chars = list(".".join(pieces))
    return "".join(chars)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutations() | st.text(max_size=400))
def test_fuzz_no_tampered_token_is_accepted(mutated: str) -> None:
    agent, part, history, session, sid = _fuzz_case()
    token = md.resume_token(part)
    plan = _plan_with(agent, part, history, mutated)
    if mutated == token:
        assert len(check_tokens(agent, plan, session_id=session, snapshot_id=sid)) == 1
        return
    with pytest.raises(PermissionDeniedError):
        check_tokens(agent, plan, session_id=session, snapshot_id=sid)


def test_the_token_keys_are_spelled_in_the_keys_module() -> None:
    src = ROOT / "src" / "interlock"
    pattern = re.compile("[\"'](resumeToken|consumedTokens)[\"']")
    found = [
        f"{path.name}:{n}"
        for path in sorted(src.rglob("*.py"))
        if path.name != "_keys.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []
