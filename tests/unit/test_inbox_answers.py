"""The inbox's answers and listing behind the HTTP API: Restart, Edit, Reject(reason), paging, a given token."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from inbox_apps import RUNS, build_agents

from interlock import Agent, SQLiteStore
from interlock.errors import FailedPreconditionError, InvalidArgumentError, PermissionDeniedError
from interlock.http._inbox.forms import fields_for, read_form
from interlock.inbox._answers import Edit, Reject, Restart
from interlock.inbox._inbox import Inbox


@pytest.fixture
async def setup(tmp_path: pathlib.Path) -> AsyncIterator[tuple[SQLiteStore, dict[str, Agent], Inbox]]:
    async with SQLiteStore(tmp_path / "s.db") as store:
        agents = {a.name: a for a in build_agents(store, tokens=True)}
        yield store, agents, Inbox(store, agents=list(agents.values()))


async def test_edit_runs_a_held_call_with_the_revised_input_only_where_allowed(
    setup: tuple[SQLiteStore, dict[str, Agent], Inbox],
) -> None:
    _, agents, inbox = setup
    pay = await agents["bank"].run("pay ivy 10")
    out = await inbox.answer(pay.snapshot_id or "", Edit({"to": "ivy", "amount": 2}), identity="ann")
    assert out.finish_reason == "stop" and RUNS[-1] == {"to": "ivy", "amount": 2.0}
    held = await agents["ops"].run("delete y.txt")  # ops takes no revised inputs
    with pytest.raises(InvalidArgumentError, match="modified inputs"):
        await inbox.answer(held.snapshot_id or "", Edit({"path": "/etc/passwd"}), identity="ann")
    with pytest.raises(FailedPreconditionError, match="runs only when approved"):
        await inbox.answer(held.snapshot_id or "", Restart(), identity="ann")
    assert [i.snapshot_id for i in await inbox.pending()] == [held.snapshot_id]
    out = await inbox.answer(held.snapshot_id or "", Reject(reason="keep it"), identity="ann")
    assert "keep it" in out.text


async def test_a_given_token_is_the_one_the_answer_carries(setup: tuple[SQLiteStore, dict[str, Agent], Inbox]) -> None:
    _, agents, inbox = setup
    pay = await agents["bank"].run("pay jay 1")
    with pytest.raises(PermissionDeniedError) as refused:
        await inbox.answer(pay.snapshot_id or "", Restart({"approved": True}), token="it1.nope")
    assert refused.value.details == {"reason": "malformed"}
    out = await inbox.answer(pay.snapshot_id or "", Restart({"approved": True}))  # the stored token
    assert out.finish_reason == "stop"


async def test_pending_pages_in_either_order(setup: tuple[SQLiteStore, dict[str, Agent], Inbox]) -> None:
    _, agents, inbox = setup
    ids = [(await agents["bank"].run(f"pay p{i} 1")).snapshot_id for i in range(5)]
    first = await inbox.pending(limit=2)
    rest = await inbox.pending(after=first[-1].position)
    assert [i.snapshot_id for i in first + rest] == ids
    newest = await inbox.pending(newest_first=True, limit=3)
    older = await inbox.pending(newest_first=True, after=newest[-1].position)
    assert [i.snapshot_id for i in newest + older] == ids[::-1]
    assert await inbox.pending(older_than=timedelta(hours=1)) == []


def test_forms_are_typed_and_read_back_as_json() -> None:
    schema = {
        "type": "object",
        "required": ["to", "amount"],
        "properties": {
            "to": {"type": "string", "title": "To", "minLength": 1},
            "amount": {"type": "number", "exclusiveMinimum": 0},
            "count": {"type": "integer"},
            "urgent": {"type": "boolean"},
            "kind": {"enum": ["a", "b"]},
            "extra": {"anyOf": [{"$ref": "#/$defs/Extra"}, {"type": "null"}], "title": "More"},
        },
        "$defs": {"Extra": {"type": "object", "properties": {"x": {"type": "integer"}}}},
    }
    fields = {f.name: f for f in fields_for(schema, {"to": "bob", "amount": 5})}
    assert [(n, f.kind) for n, f in fields.items()] == [
        ("to", "text"),
        ("amount", "number"),
        ("count", "integer"),
        ("urgent", "checkbox"),
        ("kind", "select"),
        ("extra", "json"),
    ]
    assert fields["to"].shown == "bob" and fields["amount"].hint == "> 0" and fields["extra"].label == "More"
    form = {"p.to": "carol", "p.amount": "2.5", "p.count": "3", "p.kind": "b", "p.extra": '{"x": 1}', "p._": "1"}
    assert read_form(schema, form, "p") == {
        "to": "carol",
        "amount": 2.5,
        "count": 3,
        "urgent": False,
        "kind": "b",
        "extra": {"x": 1},
    }
    assert read_form(schema, {"p.amount": "lots"}, "p")["amount"] == "lots"  # the server says what is wrong
    with pytest.raises(InvalidArgumentError, match="not JSON"):
        read_form(schema, {"p.extra": "{nope"}, "p")
    assert read_form(None, {"p.__json__": "[1, 2]"}, "p") == [1, 2]
    assert read_form({"type": "string"}, {}, "p") is None
