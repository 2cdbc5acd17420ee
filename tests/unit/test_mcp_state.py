"""The MCP adapter's sealed ``requestState`` and its elicitation forms, without a server.

A state opens only where it was sealed (or under a key still listed: rotation), for the same
caller, agent and arguments, before its expiry; each refusal says why. Forms flatten the
declared answer as the inbox's page does, and read an elicitation result back into an answer.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from mcp_types import ElicitResult

from interlock import ToolRequestPart
from interlock.errors import (
    FailedPreconditionError,
    InterlockError,
    InvalidArgumentError,
    PermissionDeniedError,
    UsageError,
)
from interlock.http._mcp.forms import answer_of, form_for
from interlock.http._mcp.state import StateSeal
from interlock.http._service import Caller
from interlock.inbox import Approve, PendingInterrupt, Reject, Respond, Restart

OLD, NEW = b"o" * 32, b"n" * 32
ALICE = Caller(identity="alice", tenant="acme")
ARGS = {"message": "pay bob 5"}


def sealed(seal: StateSeal, *, now: float = 1000.0) -> str:
    return seal.seal(
        agent="bank", snapshot_id="s1", keys=["t1"], tokens={"t1": "tok"}, arguments=ARGS, caller=ALICE, now=now
    )


def refused(seal: StateSeal, state: object, **changes: Any) -> InterlockError:
    options: dict[str, Any] = {"agent": "bank", "arguments": ARGS, "caller": ALICE, "now": 1001.0} | changes
    with pytest.raises(InterlockError) as caught:
        seal.open(state, **options)
    return caught.value


def test_a_state_opens_for_its_caller_and_call_and_keys_rotate() -> None:
    state = sealed(StateSeal([OLD]))
    pause = StateSeal([NEW, OLD]).open(state, agent="bank", arguments=ARGS, caller=ALICE, now=1001.0)
    assert (pause.snapshot_id, pause.keys, pause.tokens) == ("s1", ("t1",), {"t1": "tok"})
    assert sealed(StateSeal([OLD])) != state  # a nonce: no two seal alike
    assert not any(secret in _decoded(state) for secret in (b"alice", b'"s1"', b'"tok"'))  # encrypted, not signed


def _decoded(state: str) -> bytes:
    """Every base64 segment of a sealed state, decoded: a signed-only state would show its JSON here."""
    return b"".join(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)) for part in state.split("."))


@pytest.mark.parametrize(
    ("changes", "error", "reason"),
    [
        ({"caller": Caller(identity="mallory", tenant="acme")}, PermissionDeniedError, "foreign"),
        ({"caller": Caller(identity="alice", tenant="globex")}, PermissionDeniedError, "foreign"),
        ({"agent": "ops"}, InvalidArgumentError, "other_call"),
        ({"arguments": {"message": "pay bob 500"}}, InvalidArgumentError, "other_call"),
        ({"now": 1000.0 + 600.0}, FailedPreconditionError, "expired"),
    ],
)
def test_a_state_for_another_caller_or_call_or_past_its_expiry_is_refused_saying_why(
    changes: dict[str, Any], error: type[InterlockError], reason: str
) -> None:
    seal = StateSeal([OLD])
    got = refused(seal, sealed(seal), **changes)
    assert isinstance(got, error) and got.details == {"reason": reason}, got


@pytest.mark.parametrize("state", ["", "v1.AAAA", 42, None, "x" * 20_000])
def test_altered_or_foreign_key_states_are_refused_as_tampered(state: object) -> None:
    seal = StateSeal([OLD])
    good = sealed(seal)
    for bad in (state, good[:-2] + ("AA" if good[-2:] != "AA" else "BB"), sealed(StateSeal([NEW]))):
        got = refused(seal, bad)
        assert isinstance(got, PermissionDeniedError) and got.details == {"reason": "tampered"}, bad


def test_keys_shorter_than_32_bytes_and_a_bad_lifetime_are_refused() -> None:
    with pytest.raises(UsageError, match="at least 32 bytes"):
        StateSeal([b"short"])
    with pytest.raises(UsageError, match="positive number of seconds"):
        StateSeal(None, ttl=0)


def item(**changes: Any) -> PendingInterrupt:
    options: dict[str, Any] = {
        "snapshot_id": "s1",
        "session_id": "x",
        "agent": "bank",
        "tool": "transfer",
        "ref": "t1",
        "input": {"to": "bob"},
        "data": {"question": "Send?"},
        "is_hold": False,
        "created_at": datetime.now(UTC),
        "age": timedelta(0),
        "part": ToolRequestPart(name="transfer", ref="t1", input={"to": "bob"}),
    }
    return PendingInterrupt(**(options | changes))


RESUME = {"type": "object", "properties": {"approved": {"type": "boolean"}, "memo": {"type": "object"}}}


def accept(**content: Any) -> ElicitResult:
    return ElicitResult(action="accept", content=content)


def test_a_resume_type_is_asked_flat_and_read_back_as_a_restart() -> None:
    options = {"respond": {"output_schema": None}, "restart": {"payload_schema": RESUME}}
    form = form_for(item(), options)
    assert form.schema["properties"]["approved"]["type"] == "boolean"
    assert form.schema["properties"]["memo"]["type"] == "string"  # nested: JSON text
    assert answer_of(item(), form, accept(approved=True, memo='{"a": 1}')) == Restart(
        {"approved": True, "memo": {"a": 1}}
    )
    with pytest.raises(InvalidArgumentError, match="'memo' is not JSON"):
        answer_of(item(), form, accept(approved=True, memo="{"))
    assert answer_of(item(), form, ElicitResult(action="decline")) == Reject()
    assert answer_of(item(), form, ElicitResult(action="cancel")) is None


def test_an_interrupt_only_tool_asks_its_output_and_a_scalar_is_one_json_value() -> None:
    form = form_for(item(), {"respond": {"output_schema": {"type": "integer"}}})
    assert list(form.schema["properties"]) == ["value"]
    assert answer_of(item(), form, accept(value="7")) == Respond(7)


def test_a_hold_asks_approve_or_deny_with_a_reason() -> None:
    options = {"approve": {"payload_schema": None}, "reject": {"payload_schema": None}, "respond": {}}
    form = form_for(item(is_hold=True), options)
    assert form.schema["required"] == ["approve"]
    assert answer_of(item(), form, accept(approve=True)) == Approve()
    assert answer_of(item(), form, accept(approve=False, reason="no")) == Reject(reason="no")
    with pytest.raises(InvalidArgumentError, match="needs 'approve'"):
        answer_of(item(), form, accept(approve="yes"))
