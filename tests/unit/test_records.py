"""The record types' own helpers: copies (``evolve``), fresh ids and the journal's digest."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import uuid
from typing import Any

import pytest
from journal_entries import entry as journal_entry

from interlock.records._journal import JournalEntry, digest
from interlock.records._sessions import SessionState, Snapshot, new_id


def test_evolve_is_dataclasses_replace() -> None:
    """A copy with the changes, the other fields kept, the original untouched; an unknown field refused."""
    row = Snapshot(
        snapshot_id="p", session_id="s", finish_reason="interrupted", claimed_by="t1", metadata={"agent": "bot"}
    )
    assert row.evolve(version=4, claimed_by=None) == dataclasses.replace(row, version=4, claimed_by=None)
    assert row.evolve() == row and row.evolve() is not row
    assert row.version == 0 and row.claimed_by == "t1"
    with pytest.raises(TypeError, match="Snapshot has no field 'nope'"):
        row.evolve(nope=1)
    entry = journal_entry()
    assert entry.evolve(attempt=2) == dataclasses.replace(entry, attempt=2)
    assert Snapshot.evolve.__doc__ and JournalEntry.evolve.__doc__  # the declared methods' docs stay


def test_a_state_copy_owns_its_lists_and_custom_state() -> None:
    state = SessionState(session_id="s", custom={"n": [1]})
    copy = state.copy()
    assert copy == state
    assert copy.messages is not state.messages and copy.artifacts is not state.artifacts
    assert copy.custom is not state.custom and copy.custom["n"] is not state.custom["n"]


def test_new_id_is_a_canonical_uuid4() -> None:
    ids = {new_id() for _ in range(2000)}
    assert len(ids) == 2000
    for text in ids:
        found = uuid.UUID(text)
        assert str(found) == text and found.version == 4 and found.variant == uuid.RFC_4122


def test_digest_is_of_the_canonical_json_and_refuses_what_is_not_json() -> None:
    """Sorted keys, no spaces, UTF-8 (a lone surrogate kept); NaN, a cycle and an unknown type raise as json does."""
    value = {"b": [1, {"z": None, "a": 2.25}], "a": "ü\ud800", "c": [True, -0.0, 10**30]}
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    assert digest(value) == hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    assert digest({"a": 1, "b": 2}) == digest({"b": 2, "a": 1})
    cycle: list[Any] = []
    cycle.append(cycle)
    for bad in (float("nan"), {"a": float("inf")}, cycle):
        with pytest.raises(ValueError):
            digest(bad)
    with pytest.raises(TypeError):
        digest({"a": object()})


def test_fast_init_builds_what_the_dataclass_init_builds() -> None:
    """Defaults and fresh default factories, required fields, unknown names refused, the record still frozen."""
    from interlock import Message, ToolRequestPart
    from interlock.records._evolve import fast_init

    part = ToolRequestPart(name="t", input={"a": 1})
    assert (part.ref, part.metadata, part.extra, part.kind) == (None, None, {}, "tool_request")
    assert ToolRequestPart(name="t").extra is not ToolRequestPart(name="t").extra  # a factory per object
    assert Message(role="user") == Message(role="user", content=[], metadata=None, extra={})
    with pytest.raises(TypeError):
        ToolRequestPart()  # pyright: ignore[reportCallIssue]
    with pytest.raises(TypeError):
        ToolRequestPart(name="t", nope=1)  # pyright: ignore[reportCallIssue]
    with pytest.raises(dataclasses.FrozenInstanceError):
        part.name = "u"  # pyright: ignore[reportAttributeAccessIssue]

    @dataclasses.dataclass(kw_only=True, slots=True)
    class Unfrozen:
        x: int

    with pytest.raises(TypeError, match="frozen, slotted dataclass"):
        fast_init(Unfrozen)

    @dataclasses.dataclass(frozen=True, slots=True)
    class Positional:
        x: int

    with pytest.raises(TypeError, match="keyword-only"):
        fast_init(Positional)


def test_records_written_as_builders_are_their_own_class_frozen_and_equal() -> None:
    """Copies and many-field records are written as builders, then become the record class: nothing else shows."""
    from interlock import ToolRequestPart
    from interlock.records._evolve import evolver, fast_init

    row = Snapshot(snapshot_id="p", session_id="s", version=3, metadata={"agent": "bot"})
    entry = journal_entry()
    part = ToolRequestPart(name="t", ref="r", input={"a": 1}, metadata={"m": 1})
    for record, changes in ((row, {"version": 4}), (entry, {"status": "done"}), (part, {"ref": "q"})):
        copy = evolver(type(record))(record, **changes)
        assert type(copy) is type(record)
        assert copy == dataclasses.replace(record, **changes)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(copy, dataclasses.fields(copy)[0].name, "x")
    assert type(row) is Snapshot and row == dataclasses.replace(row)
    again = JournalEntry(**{k: v for k, v in _fields(entry).items() if k != "steps"})
    assert again == entry and again.steps == {} and again.steps is not entry.steps  # a factory per object

    @fast_init
    @dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
    class Wide:
        a: int = 0
        b: int = 1
        c: int = 2
        d: int = 3
        e: int = 4
        f: int = 5
        g: int = 6
        h: int = 7
        i: int = 8
        j: int = 9
        k: int = 10
        type: str = "a field named as a builtin"
        items: list[int] = dataclasses.field(default_factory=list[int])

    @dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
    class Narrower(Wide):  # a subclass: written through the slots' descriptors
        extra: int = 0

    wide = Wide(a=5)
    assert type(wide) is Wide and (wide.a, wide.k, wide.items) == (5, 10, []) and wide.items is not Wide().items
    assert Wide(type="t").type == "t"
    sub = Narrower(a=6, extra=1)
    assert type(sub) is Narrower and (sub.a, sub.extra) == (6, 1)


def _fields(record: Any) -> dict[str, Any]:
    return {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}
