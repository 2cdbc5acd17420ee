"""The store's fast reader of stored histories gives exactly the full readers' result, errors included."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import pathlib
import sqlite3
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_wire import domain_messages, json_messages

from interlock import Message, Snapshot
from interlock._stored_messages import stored_messages
from interlock.errors import DataLossError, InvalidArgumentError
from interlock.messages import messages_from_json, messages_to_json
from interlock.parts import DataPart, ReasoningPart, TextPart, ToolRequestPart, ToolResponsePart
from interlock.records._interrupt_index import InterruptQuery
from interlock.records._sessions import SessionState
from interlock.stores.sqlite import SQLiteStore


def outcome(read: Any, data: Any) -> Any:
    try:
        return read(data)
    except Exception as exc:
        return type(exc), str(exc)


@given(st.lists(domain_messages, max_size=4))
def test_what_a_store_writes_reads_back_unchanged(messages: list[Message]) -> None:
    stored = json.loads(json.dumps(messages_to_json(messages)))
    assert stored_messages(stored) == messages
    assert stored_messages(stored) == messages_from_json(stored)


@given(st.lists(json_messages(), max_size=4))
def test_any_wire_history_reads_as_the_full_reader_reads_it(data: list[dict[str, Any]]) -> None:
    assert stored_messages(data) == messages_from_json(data)


DAMAGED: list[Any] = [
    {"role": "user", "content": []},
    [5],
    ["text"],
    [{"role": 5, "content": []}],
    [{"role": "user", "content": {"text": "x"}}],
    [{"role": "user", "content": [], "metadata": [1]}],
    [{"role": "user", "content": [5]}],
    [{"role": "user", "content": [{}]}],
    [{"role": "user", "content": [{"text": 5}]}],
    [{"role": "user", "content": [{"text": None}]}],
    [{"role": "user", "content": [{"text": "x", "metadata": [1]}]}],
    [{"role": "user", "content": [{"text": "x", "custom": "c"}]}],
    [{"role": "user", "content": [{"metadata": {"a": 1}}]}],
    [{"role": "user", "content": [{"toolRequest": "x"}]}],
    [{"role": "user", "content": [{"toolRequest": {"name": 5}}]}],
    [{"role": "user", "content": [{"toolResponse": {"name": "n", "content": {"text": "x"}}}]}],
    [{"role": "user", "content": [{"toolResponse": {"name": "n", "content": [{"text": 5}]}}]}],
    [{"role": "user", "content": [{"reasoning": []}]}],
    [{"role": "user", "content": [{"media": {"url": 5}}]}],
    [{"role": "user", "content": [{"nope": 1}]}],
]


@pytest.mark.parametrize("data", DAMAGED, ids=range(len(DAMAGED)))
def test_a_damaged_history_fails_as_the_full_reader_fails(data: Any) -> None:
    expected = outcome(messages_from_json, data)
    assert expected[0] is InvalidArgumentError
    assert outcome(stored_messages, data) == expected


UNUSUAL: list[Any] = [
    [{"role": "user"}],  # no content
    [{"role": "user", "content": None, "metadata": None}],
    [{"content": [], "role": "user", "x": 1}],  # an unknown key, kept
    [{"role": "user", "content": [{"metadata": {"a": 1}, "text": "x"}]}],  # the kind key not first
    [{"role": "user", "content": [{"text": "x", "later": True}]}],
    [{"role": "user", "content": [{"data": None}, {"data": None, "metadata": None, "custom": None}]}],
    [{"role": "user", "content": [{"custom": {"x": 1}}, {"text": None, "reasoning": "r"}]}],
    [{"role": "tool", "content": [{"toolResponse": {"name": "n", "content": [{"text": "a"}], "z": 1}}]}],
    [{"role": "model", "content": [{"toolRequest": {"ref": "r", "input": None, "partial": True, "y": 2}}]}],
]


@pytest.mark.parametrize("data", UNUSUAL, ids=range(len(UNUSUAL)))
def test_unusual_shapes_read_as_the_full_reader_reads_them(data: Any) -> None:
    assert stored_messages(data) == messages_from_json(data)


def test_every_field_is_set_on_what_is_built_here() -> None:
    """The fast path sets slots one by one: a field it forgot would raise on access (and on ``==``)."""
    request = ToolRequestPart(name="n", ref="r", input={"a": 1}, partial=False, metadata={"interrupt": True})
    response = ToolResponsePart(name="n", ref="r", output=1, content=[TextPart(text="t")], custom={"c": 1})
    messages = [
        Message(role="model", content=[request, DataPart(data=[1]), ReasoningPart(reasoning="r")], metadata={}),
        Message(role="tool", content=[response]),
    ]
    built = stored_messages(json.loads(json.dumps(messages_to_json(messages))))
    pairs: list[tuple[Any, Any]] = []
    for original, copy in zip(messages, built, strict=True):
        pairs += [(original, copy), *zip(original.content, copy.content, strict=True)]
    pairs.append((response.content[0], cast(ToolResponsePart, built[1].content[0]).content[0]))  # type: ignore[index]
    for original, copy in pairs:
        assert type(copy) is type(original)
        for field in dataclasses.fields(original):
            assert getattr(copy, field.name) == getattr(original, field.name), field.name


async def test_a_damaged_part_in_the_index_of_open_interrupts_is_data_loss(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "i.db"
    call = ToolRequestPart(name="pay", ref="r1", input={"to": "bob"}, metadata={"interrupt": True})
    snap = Snapshot(
        snapshot_id="p1",
        session_id="s",
        finish_reason="interrupted",
        state=SessionState(messages=[Message.user("pay"), Message(role="model", content=[call])]),
    )
    async with SQLiteStore(path) as store:
        await store.save("p1", lambda _: snap)
        (found,) = await store.open_interrupts(InterruptQuery(now=datetime.now(UTC)))
        assert found.part == call
    for damage, match in (
        ('{"toolRequest": "x"}', "not a part"),
        ('{"text": "x"}', "not a tool request"),
        ("[", "JSON"),
    ):
        with contextlib.closing(sqlite3.connect(path)) as con, con:
            con.execute("UPDATE interlock_open_interrupts SET part = ?", (damage,))
        async with SQLiteStore(path) as store:
            with pytest.raises(DataLossError, match=match):
                await store.open_interrupts(InterruptQuery(now=datetime.now(UTC)))


async def test_a_snapshot_column_of_the_wrong_type_is_data_loss_naming_it(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "c.db"
    snap = Snapshot(snapshot_id="a", session_id="s", state=SessionState(messages=[Message.user("hi")]))
    for column, damage, match in (
        ("keep", "'x'", "column 'keep' holds 'x', not an integer"),
        ("updated_us", "1.5", "column 'updated_us' holds 1.5, not an integer"),
        ("custom", "x'00'", "column 'custom' holds bytes, not JSON text"),
        ("metadata", "x'00'", "column 'metadata' holds bytes, not JSON text"),
        ("state_session", "x'00'", "column 'state_session' holds bytes, not JSON text"),
    ):
        async with SQLiteStore(path) as store:
            await store.save("a", lambda _: snap)
        with contextlib.closing(sqlite3.connect(path)) as con, con:
            con.execute(f"UPDATE interlock_snapshots SET {column} = {damage}")
        async with SQLiteStore(path) as store:
            with pytest.raises(DataLossError, match=match):
                await store.load("a")
            await store.delete(["a"])
