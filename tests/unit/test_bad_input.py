"""Bad input (issue 8, observations 13-16): a typed error with a canonical status, nothing run, the store unchanged."""

from __future__ import annotations

import asyncio
import datetime
import json
import math
import pathlib
import sqlite3
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

import httpx
import pytest

from interlock import (
    InMemoryStore,
    Message,
    PromptAgent,
    Resume,
    TextPart,
    ToolContext,
    ToolRequestPart,
    ToolResponsePart,
    tool,
)
from interlock.errors import (
    DataLossError,
    FailedPreconditionError,
    InvalidArgumentError,
    PermissionDeniedError,
    UnavailableError,
)
from interlock.http._server import AgentServer
from interlock.records._sessions import SessionState, Snapshot, utcnow
from interlock.stores.sqlite import SQLiteStore
from interlock.testing import EchoModel, ScriptedModel

CALLS: list[Any] = []
NOT_JSON: list[Any] = [
    {1, 2},
    datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC),
    math.nan,
    math.inf,
    float("1e999"),
    "\ud800",
    {1: "a"},
    {"deep": [[[[]]]] * 2 + [object()]},
]
NOT_JSON_IDS = ["set", "datetime", "nan", "inf", "1e999", "lone-surrogate", "int-key", "object"]


@tool
async def ask(q: dict[str, Any], ctx: ToolContext[Any], answer: Any | None) -> Any:
    """Ask a person; the answer comes back as the resume payload."""
    CALLS.append(answer)
    if answer is None:
        ctx.interrupt({"question": q})
    return answer


@tool
async def returns_nan(q: dict[str, Any]):  # no return annotation: the output is untyped on purpose
    """A buggy tool whose output is not JSON."""
    CALLS.append(q)
    return math.nan


def asking(name: str = "ask") -> Message:
    return Message(role="model", content=[ToolRequestPart(name=name, ref="r1", input={"a": 1})])


def rows(store: InMemoryStore) -> dict[Any, Any]:
    return dict(store._rows)  # pyright: ignore[reportPrivateUsage]


@pytest.fixture
async def paused() -> tuple[PromptAgent, InMemoryStore, str]:
    store = InMemoryStore()
    agent = PromptAgent("a", ScriptedModel([asking(), "done", "done"]), tools=[ask], store=store)
    out = await agent.run("hi")
    assert out.finish_reason == "interrupted" and out.snapshot_id
    CALLS.clear()
    return agent, store, out.snapshot_id


async def refused(agent: PromptAgent, store: InMemoryStore, **run: Any) -> InvalidArgumentError:
    before = rows(store)
    with pytest.raises(InvalidArgumentError) as info:
        await agent.run(**run)
    assert rows(store) == before and CALLS == []
    return info.value


# 13: wrong Python types --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "resume",
    [
        Resume(respond=[ToolRequestPart(name="ask", ref="r1", input={"a": 1})]),  # type: ignore[list-item]
        Resume(respond=ToolResponsePart(name="ask", ref="r1", output=1)),  # type: ignore[arg-type]
        Resume(restart=[ToolResponsePart(name="ask", ref="r1", output=1)]),  # type: ignore[list-item]
        {"respond": [{"toolResponse": {"name": "ask", "ref": "r1", "output": 1}}]},
        Resume(respond=[{"name": "ask"}]),  # type: ignore[list-item]
        Resume(respond=[ToolResponsePart(name=5, ref="r1", output=1)]),  # type: ignore[arg-type]
    ],
    ids=["request-in-respond", "single-part", "response-in-restart", "dict", "dict-part", "int-name"],
)
async def test_13_wrong_types_in_a_resume_are_refused_before_anything_runs(
    paused: tuple[PromptAgent, InMemoryStore, str], resume: Any
) -> None:
    agent, store, snap = paused
    error = await refused(agent, store, resume=resume, snapshot_id=snap)
    assert error.status == "INVALID_ARGUMENT" and "resume" in error.message


@pytest.mark.parametrize("value", [12345, b"bytes", ["hi"], {"role": "user"}])
async def test_13_run_of_something_that_is_not_an_input_is_refused(value: Any) -> None:
    model = ScriptedModel(["never"])
    with pytest.raises(InvalidArgumentError, match="string, a Message or an AgentInput"):
        await PromptAgent("a", model).run(value)
    assert model.requests == []


def test_13_session_state_takes_only_messages_and_artifacts() -> None:
    with pytest.raises(InvalidArgumentError, match=r"state\.messages\[0\] must be a Message, not a dict"):
        SessionState(messages=[{"role": "user", "content": [{"text": "hi"}]}])  # type: ignore[list-item]
    with pytest.raises(InvalidArgumentError, match="state.messages must be a list"):
        SessionState(messages=Message.user("hi"))  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="state.artifacts"):
        SessionState(artifacts=["x"])  # type: ignore[list-item]


async def test_13_state_with_a_dict_message_is_refused_by_run() -> None:
    model = ScriptedModel(["never"])
    state = SessionState()
    state.messages.append({"role": "user"})  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match=r"state\.messages\[0\]"):
        await PromptAgent("a", model).run("hi", state=state)
    assert model.requests == []


# 14: values that are not JSON --------------------------------------------------------------------


@pytest.mark.parametrize("bad", NOT_JSON, ids=NOT_JSON_IDS)
def test_14_check_json_is_the_one_rule(bad: Any) -> None:
    from interlock._json import check_json

    with pytest.raises(InvalidArgumentError, match="where.*is not a JSON value"):
        check_json({"ok": [1, 2.5, "x", None, True], "bad": bad}, "where")
    check_json({"ok": [1, 2.5, "x", None, True, {"é": "日本"}]}, "where")


def test_14_check_json_refuses_deep_nesting_without_recursing() -> None:
    from interlock._json import check_json

    deep: Any = 1
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(InvalidArgumentError, match="nested deeper than"):
        check_json(deep, "deep")


@pytest.mark.parametrize("bad", NOT_JSON, ids=NOT_JSON_IDS)
async def test_14_not_json_in_a_respond_output_is_refused(
    paused: tuple[PromptAgent, InMemoryStore, str], bad: Any
) -> None:
    agent, store, snap = paused
    resume = Resume(respond=[ToolResponsePart(name="ask", ref="r1", output={"v": bad})])
    error = await refused(agent, store, resume=resume, snapshot_id=snap)
    assert "resume.respond[0].output" in error.message


@pytest.mark.parametrize("bad", NOT_JSON, ids=NOT_JSON_IDS)
async def test_14_not_json_in_a_restart_payload_or_metadata_is_refused(
    paused: tuple[PromptAgent, InMemoryStore, str], bad: Any
) -> None:
    agent, store, snap = paused
    restart = ToolRequestPart(name="ask", ref="r1", input={"a": 1}, metadata={"resumed": bad})
    await refused(agent, store, resume=Resume(restart=[restart]), snapshot_id=snap)
    ok = ToolRequestPart(name="ask", ref="r1", input={"a": 1}, metadata={"resumed": "yes"})
    await refused(agent, store, resume=Resume(restart=[ok], metadata={"m": bad}), snapshot_id=snap)
    wrong_input = ToolRequestPart(name="ask", ref="r1", input={"a": bad}, metadata={"resumed": "yes"})
    await refused(agent, store, resume=Resume(restart=[wrong_input]), snapshot_id=snap)


@pytest.mark.parametrize("bad", NOT_JSON, ids=NOT_JSON_IDS)
async def test_14_not_json_in_a_user_message_is_refused(bad: Any) -> None:
    store = InMemoryStore()
    model = ScriptedModel(["never"])
    agent = PromptAgent("a", model, store=store)
    message = Message(role="user", content=[TextPart(text="hi", metadata={"k": bad})])
    with pytest.raises(InvalidArgumentError, match=r"message\.content\[0\]\.metadata"):
        await agent.run(message)
    with pytest.raises(InvalidArgumentError, match=r"message\.metadata"):
        await agent.run(Message(role="user", content=[TextPart(text="hi")], metadata={"k": bad}))
    assert model.requests == [] and rows(store) == {}


async def test_14_a_lone_surrogate_in_text_is_refused() -> None:
    model = ScriptedModel(["never"])
    with pytest.raises(InvalidArgumentError, match="lone surrogate"):
        await PromptAgent("a", model).run("hi \ud800")
    assert model.requests == []


@pytest.mark.parametrize("bad", NOT_JSON, ids=NOT_JSON_IDS)
def test_14_not_json_custom_state_is_refused(bad: Any) -> None:
    with pytest.raises(InvalidArgumentError, match=r"state\.custom"):
        SessionState(custom={"x": bad})


async def test_14_a_tool_returning_nan_fails_the_turn_cleanly_and_stores_nothing_bad() -> None:
    store = InMemoryStore()
    agent = PromptAgent("a", ScriptedModel([asking("returns_nan"), "done"]), tools=[returns_nan], store=store)
    app = AgentServer([agent])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        body = {"data": {"message": {"role": "user", "content": [{"text": "go"}]}}}
        answer = await http.post("/a", json=body)
        assert answer.status_code < 500, answer.text
        payload = answer.json()
        error = payload["result"]["error"] if "result" in payload else payload
        assert error["status"] == "INVALID_ARGUMENT", error
        assert "output of tool 'returns_nan'" in error["message"] and "Traceback" not in error["message"]
        for snap in list(rows(store).values()):
            got = await http.post("/a/getSnapshot", json={"data": {"snapshotId": snap.snapshot_id}})
            assert got.status_code == 200, got.text


async def test_14_a_tool_interrupting_with_data_that_is_not_json_fails_cleanly() -> None:
    @tool
    async def odd(q: dict[str, Any], ctx: ToolContext[Any]) -> str:
        """Interrupts with bad data."""
        ctx.interrupt({"when": "\ud800"})

    store = InMemoryStore()
    agent = PromptAgent("a", ScriptedModel([asking("odd"), "done"]), tools=[odd], store=store)
    out = await agent.run("go", raise_on_error=False)
    assert out.error is not None and out.error.status == "INVALID_ARGUMENT"
    assert "interrupt data" in out.error.message
    app = AgentServer([agent])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        for snap in list(rows(store).values()):
            got = await http.post("/a/getSnapshot", json={"data": {"snapshotId": snap.snapshot_id}})
            assert got.status_code == 200, got.text


# 15: HTTP ----------------------------------------------------------------------------------------


@pytest.fixture
async def http() -> AsyncIterator[tuple[httpx.AsyncClient, InMemoryStore]]:
    store = InMemoryStore()
    app = AgentServer([PromptAgent("echo", EchoModel(), store=store)], max_body=100_000)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        yield client, store


def deep_body(depth: int) -> bytes:
    metadata = b"[" * depth + b"]" * depth
    return b'{"data":{"message":{"role":"user","content":[{"text":"x","metadata":{"a":' + metadata + b"}}]}}}"


@pytest.mark.parametrize("path", ["/echo", "/echo/getSnapshot", "/echo/abort", "/echo/waitForSnapshot"])
@pytest.mark.parametrize(
    "body",
    [
        deep_body(1000),
        deep_body(200),
        b'{"data":{"message":{"role":"user","content":[{"text":"x","metadata":{"a":NaN}}]}}}',
        b'{"data":{"message":{"role":"user","content":[{"text":"x","metadata":{"a":1e999}}]}}}',
        b'{"data":{"message":{"role":"user","content":[{"text":"\\ud800"}]}}}',
        b"\xff\xfe{}",
        b"[1, 2]",
        b'"just a string"',
        b'{"data": {"snapshotId": 5}, "init": {"snapshotId": 5}}',
        b'{"data": {"message": {"role": 5}}}',
        b'{"data": {"message": {"role": "user", "content": [{"toolRequest": {"name": "x", "ref": 5}}]}}}',
        b'{"data": {"resume": {"respond": {"toolResponse": {}}}}}',
        b'{"data": "x", "init": []}',
    ],
    ids=[
        "deep-1000",
        "deep-200",
        "nan",
        "1e999",
        "surrogate",
        "not-utf8",
        "list",
        "string",
        "int-ids",
        "int-role",
        "int-ref",
        "resume-not-list",
        "wrong-shapes",
    ],
)
async def test_15_bad_bodies_get_a_4xx_with_a_canonical_status(
    http: tuple[httpx.AsyncClient, InMemoryStore], path: str, body: bytes
) -> None:
    client, store = http
    answer = await client.post(path, content=body)
    assert 400 <= answer.status_code < 500, answer.text
    error = answer.json()
    assert error["status"] in ("INVALID_ARGUMENT", "NOT_FOUND", "FAILED_PRECONDITION"), error
    assert rows(store) == {}


async def test_15_unknown_routes_are_404(http: tuple[httpx.AsyncClient, InMemoryStore]) -> None:
    client, _ = http
    for path in ["/nope", "/echo/nope", "/echo/getSnapshot/x", "/"]:
        answer = await client.post(path, json={})
        assert answer.status_code == 404 and answer.json()["status"] == "NOT_FOUND"


async def test_15_an_abandoned_wait_for_snapshot_stops_waiting() -> None:
    store = InMemoryStore()
    now = utcnow()
    pending = Snapshot(snapshot_id="p", session_id="s", status="pending", heartbeat_at=now, state=SessionState())
    await store.save("p", lambda _: pending)
    agent = PromptAgent("echo", EchoModel(), store=store)
    polls = 0
    real = agent.get_snapshot

    async def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal polls
        polls += 1
        return await real(*args, **kwargs)

    agent.get_snapshot = counting
    app = AgentServer([agent], wait_timeout=30)
    body = json.dumps({"data": {"snapshotId": "p"}}).encode()
    messages: list[dict[str, Any]] = [{"type": "http.request", "body": body, "more_body": False}]
    gone = asyncio.Event()

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop(0)
        await gone.wait()
        return {"type": "http.disconnect"}

    sent: list[MutableMapping[str, Any]] = []

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    scope: dict[str, Any] = {
        "type": "http",
        "method": "POST",
        "path": "/echo/waitForSnapshot",
        "headers": [],
        "query_string": b"",
    }
    task = asyncio.ensure_future(app(scope, receive, send))
    await asyncio.sleep(0.35)
    assert polls == 1 and not task.done()  # read once, then woken by the store's watch (nothing changed)
    gone.set()
    async with asyncio.timeout(2):
        await task
    after = polls
    await asyncio.sleep(0.3)
    assert polls == after and sent == []


# 16: SQLite --------------------------------------------------------------------------------------


def test_16_an_empty_path_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="needs a database path"):
        SQLiteStore("")


def _snap(sid: str) -> Snapshot:
    return Snapshot(snapshot_id=sid, session_id="s", state=SessionState(session_id="s"))


async def test_16_a_timestamp_holding_text_is_data_loss_naming_the_snapshot(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "ts.db"
    async with SQLiteStore(path) as store:
        await store.save("a", lambda _: _snap("a"))
    for column, value in (("created_us", "yesterday"), ("heartbeat_us", "x"), ("created_us", 2**62)):
        with sqlite3.connect(path) as con:
            con.execute(f"UPDATE interlock_snapshots SET {column} = ?", (value,))
        async with SQLiteStore(path) as store:
            with pytest.raises(DataLossError, match="snapshot 'a'"):
                await store.load("a")
        with sqlite3.connect(path) as con:
            con.execute("UPDATE interlock_snapshots SET created_us = 5, heartbeat_us = NULL")


async def test_16_a_missing_directory_is_a_failed_precondition(tmp_path: pathlib.Path) -> None:
    store = SQLiteStore(tmp_path / "no" / "such" / "dir.db")
    try:
        with pytest.raises(FailedPreconditionError, match="directory exists"):
            await store.load("a")
    finally:
        await store.close()


@pytest.mark.parametrize("table", ["interlock_snapshots", "interlock_sessions"])
async def test_16_a_foreign_table_is_a_failed_precondition(tmp_path: pathlib.Path, table: str) -> None:
    path = tmp_path / "foreign.db"
    with sqlite3.connect(path) as con:
        con.execute(f"CREATE TABLE {table} (x TEXT)")
        con.execute(f"INSERT INTO {table} VALUES ('theirs')")
    store = SQLiteStore(path)
    try:
        with pytest.raises(FailedPreconditionError, match="layout"):
            await store.load("a")
    finally:
        await store.close()
    with sqlite3.connect(path) as con:
        assert con.execute(f"SELECT x FROM {table}").fetchall() == [("theirs",)]


async def test_16_a_read_only_database_is_permission_denied(tmp_path: pathlib.Path) -> None:
    async with SQLiteStore(tmp_path / "ro.db") as store:
        await store.save("a", lambda _: _snap("a"))
        await store._call(lambda: store._db().execute("PRAGMA query_only = 1"))  # pyright: ignore[reportPrivateUsage]
        with pytest.raises(PermissionDeniedError, match="writable"):
            await store.save("b", lambda _: _snap("b"))
        loaded = await store.load("a")
        assert loaded is not None


async def test_16_a_locked_database_stays_unavailable(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "locked.db"
    async with SQLiteStore(path) as store:
        await store.save("a", lambda _: _snap("a"))
        await store._call(lambda: store._db().execute("PRAGMA busy_timeout = 50"))  # pyright: ignore[reportPrivateUsage]
        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("BEGIN EXCLUSIVE")
            with pytest.raises(UnavailableError, match="retrying may help"):
                await store.save("b", lambda _: _snap("b"))
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert isinstance(await store.save("b", lambda _: _snap("b")), Snapshot)


async def test_an_empty_resume_to_a_client_managed_agent_with_no_history_is_a_clear_refusal() -> None:
    from interlock import PromptAgent, Resume
    from interlock.testing import EchoModel

    out = await PromptAgent("s", EchoModel()).run(resume=Resume(), raise_on_error=False)
    assert out.error is not None and out.error.status == "FAILED_PRECONDITION", out.error
