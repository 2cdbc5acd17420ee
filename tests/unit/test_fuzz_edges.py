"""Fuzz the edges (issue 8): HTTP bodies and Python resume payloads never give a 5xx, INTERNAL or a hang.

Every refused call leaves the stored rows exactly as they were, and a refused resume never
runs the tool.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, cast

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from interlock import Message, PromptAgent, Resume, TextPart, ToolContext, ToolRequestPart, ToolResponsePart, tool
from interlock.errors import InterlockError
from interlock.http._server import AgentServer
from interlock.models import ModelRequest, ModelResponse
from interlock.stores.sqlite import SQLiteStore

FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
BAD_STATUSES = {"INTERNAL", "UNKNOWN", "DATA_LOSS"}


class AskingModel:
    """Asks the ``ask`` tool after every user message; says ``done`` after a tool answer."""

    name = "test/asking"

    async def generate(self, request: ModelRequest, *, on_chunk: Any = None) -> ModelResponse:
        if request.messages and request.messages[-1].role == "tool":
            return ModelResponse(message=Message.model("done"))
        ask_part = ToolRequestPart(name="ask", ref="r1", input={"a": 1})
        return ModelResponse(message=Message(role="model", content=[ask_part]), finish_reason="stop")


@dataclass
class Site:
    store: SQLiteStore
    path: pathlib.Path
    agent: PromptAgent
    http: httpx.AsyncClient
    paused: list[str] = field(default_factory=list[str])
    calls: list[Any] = field(default_factory=list[Any])

    def rows(self) -> list[Any]:
        with sqlite3.connect(self.path) as con:
            return [
                con.execute("SELECT * FROM interlock_snapshots ORDER BY tenant, snapshot_id").fetchall(),
                con.execute("SELECT * FROM interlock_sessions ORDER BY id").fetchall(),
            ]

    async def pause(self) -> str:
        out = await self.agent.run("please ask")
        assert out.finish_reason == "interrupted" and out.snapshot_id
        self.paused.append(out.snapshot_id)
        return out.snapshot_id


@pytest.fixture
async def site(tmp_path: pathlib.Path) -> AsyncIterator[Site]:
    calls: list[Any] = []

    @tool
    async def ask(q: dict[str, Any], ctx: ToolContext[Any], answer: Any | None) -> Any:
        """Ask a person."""
        calls.append(answer)
        if answer is None:
            ctx.interrupt({"question": q})
        return {"answer": answer}

    path = tmp_path / "fuzz.db"
    async with SQLiteStore(path) as store:
        agent = PromptAgent("ask", AskingModel(), tools=[ask], store=store)
        app = AgentServer(
            [agent, PromptAgent("stateless", AskingModel(), tools=[ask])],
            max_body=200_000,
            wait_timeout=0.2,
            body_timeout=1.0,
        )
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://fuzz") as http:
            s = Site(store=store, path=path, agent=agent, http=http, calls=calls)
            await s.pause()
            calls.clear()
            yield s


# strategies ---------------------------------------------------------------------------------------

_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from(["\ud800", "\udfff", "r1", "ask", "", "user"]),
)
json_like: st.SearchStrategy[Any] = st.recursive(
    _leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
"""JSON-shaped values, including what JSON cannot hold (NaN, infinities, lone surrogates)."""

_python_junk = st.one_of(
    st.sets(st.integers(), max_size=2),
    st.just(object()),
    st.dictionaries(st.integers(), st.text(max_size=3), min_size=1, max_size=2),
    st.binary(max_size=4),
    st.tuples(st.integers()),
)
python_like = st.recursive(
    st.one_of(_leaf, _python_junk),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
"""Python values a caller might put in an ``Any`` field: JSON and not."""


def _mostly(valid: st.SearchStrategy[Any], junk: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Usually a valid value (so the checks further in are reached too), sometimes junk."""
    return st.one_of(valid, valid, valid, junk)


_names = _mostly(st.sampled_from(["ask", "other", ""]), json_like)
_refs = _mostly(st.sampled_from(["r1", "r2", None]), json_like)
Strategies = dict[str, st.SearchStrategy[Any]]


def _object(required: Strategies, optional: Strategies | None = None) -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries(required, optional=optional or {})


_wire_part: st.SearchStrategy[Any] = st.one_of(
    _object({"text": _mostly(st.text(max_size=5), json_like)}, {"metadata": json_like}),
    _object(
        {"toolResponse": _object({"name": _names, "ref": _refs, "output": json_like})},
        {"metadata": json_like},
    ),
    _object(
        {"toolRequest": _object({"name": _names, "ref": _refs, "input": _mostly(st.just({"a": 1}), json_like)})},
        {"metadata": _object({"resumed": json_like})},
    ),
    json_like,
)
_parts = _mostly(st.lists(_wire_part, max_size=3), json_like)
_message = st.fixed_dictionaries(
    {"role": _mostly(st.sampled_from(["user", "model", "tool"]), json_like), "content": _parts}
)
_input = st.fixed_dictionaries(
    {},
    optional={
        "message": _mostly(_message, json_like),
        "resume": _mostly(
            st.fixed_dictionaries({}, optional={"respond": _parts, "restart": _parts, "metadata": json_like}),
            json_like,
        ),
        "detach": _mostly(st.booleans(), json_like),
    },
)


def _init(paused: list[str]) -> st.SearchStrategy[Any]:
    ids = _mostly(st.sampled_from(paused), json_like)
    state = st.fixed_dictionaries(
        {}, optional={"messages": _mostly(st.lists(_message, max_size=2), json_like), "custom": json_like}
    )
    return _mostly(st.fixed_dictionaries({}, optional={"snapshotId": ids, "sessionId": ids, "state": state}), json_like)


def _deep(depth: int) -> bytes:
    return b'{"data": {"message": {"role": "user", "content": ' + b"[" * depth + b"]" * depth + b"}}}"


@st.composite
def bodies(draw: st.DrawFn, paused: list[str]) -> bytes:
    kind = draw(st.sampled_from(["bytes", "json", "deep", "turn", "companion"]))
    if kind == "bytes":
        return draw(st.binary(max_size=64))
    if kind == "json":
        return json.dumps(draw(json_like)).encode()
    if kind == "deep":
        return _deep(draw(st.integers(min_value=50, max_value=3000)))
    if kind == "turn":
        payload: Any = {"data": draw(_input), "init": draw(_init(paused))}
    else:
        ids = _mostly(st.sampled_from(paused), json_like)
        data = draw(_mostly(st.fixed_dictionaries({}, optional={"snapshotId": ids, "sessionId": ids}), json_like))
        payload = {"data": data}
    text = json.dumps(payload)  # NaN, Infinity and lone surrogates (as \ud800) travel as sent
    return text.encode("utf-8", errors="surrogatepass") if draw(st.booleans()) else text.encode()


async def _settled(site: Site) -> list[Any]:
    """The store's rows once two reads 20 ms apart agree (at most about 2 s)."""
    rows = site.rows()
    for _ in range(100):
        await asyncio.sleep(0.02)
        again = site.rows()
        if again == rows:
            return rows
        rows = again
    return rows


ROUTES = ["/ask", "/ask/getSnapshot", "/ask/abort", "/ask/waitForSnapshot", "/stateless", "/nope", "/ask/x/y"]


# (a) HTTP bodies ----------------------------------------------------------------------------------


@FUZZ
@given(data=st.data())
async def test_fuzz_http_bodies_never_give_a_5xx_or_change_the_store_when_refused(site: Site, data: Any) -> None:
    route = data.draw(st.sampled_from(ROUTES), label="route")
    body = data.draw(bodies(site.paused), label="body")
    stream = data.draw(st.booleans(), label="stream")
    before = await _settled(site)  # an earlier example's turn may still be writing its row after its answer
    headers = {"Accept": "text/event-stream"} if stream else {}
    async with asyncio.timeout(10):
        answer = await site.http.post(route, content=body, headers=headers)
    event(f"{route} -> {answer.status_code}")
    assert answer.status_code < 500, (answer.status_code, answer.text)
    if answer.status_code >= 400:
        error = answer.json()
        assert error["status"] not in BAD_STATUSES and error["message"], error
        assert site.rows() == before, "a refused request changed the store"
        return
    sse = answer.headers.get("content-type", "").startswith("text/event-stream")
    frames = [json.loads(f[6:]) for f in answer.text.split("\n\n") if f] if sse else [answer.json()]
    for frame in cast(list[dict[str, Any]], frames):
        result: dict[str, Any] = frame.get("result") or {}
        error: Any = frame.get("error") or result.get("error")
        if error is not None:
            assert error["status"] not in BAD_STATUSES, error


# (b) Python resume payloads -----------------------------------------------------------------------


_py_response = st.builds(
    ToolResponsePart,
    name=_mostly(st.sampled_from(["ask", "other"]), python_like),
    ref=_mostly(st.sampled_from(["r1", "r2", None]), python_like),
    output=python_like,
    metadata=st.none() | st.dictionaries(st.text(max_size=4), python_like, max_size=2),
)
_py_request = st.builds(
    ToolRequestPart,
    name=_mostly(st.sampled_from(["ask", "other"]), python_like),
    ref=_mostly(st.sampled_from(["r1", "r2", None]), python_like),
    input=_mostly(st.just({"a": 1}), python_like),
    metadata=st.none() | st.fixed_dictionaries({"resumed": python_like}),
)
_py_part = st.one_of(_py_response, _py_request, st.builds(TextPart, text=st.text(max_size=4)), python_like)
_py_parts = st.lists(_py_part, max_size=3) | _py_part
resumes = st.one_of(
    st.builds(Resume, respond=_py_parts, restart=_py_parts, metadata=python_like),
    st.builds(Resume, respond=st.lists(_py_response, max_size=2), metadata=st.none()),
    st.builds(Resume, restart=st.lists(_py_request, max_size=2), metadata=st.none()),
    python_like,
    _py_part,
)


@FUZZ
@given(resume=resumes)
async def test_fuzz_resume_payloads_are_refused_cleanly_before_the_tool_runs(site: Site, resume: Any) -> None:
    snapshot_id = site.paused[-1]
    before, calls = site.rows(), len(site.calls)
    try:
        async with asyncio.timeout(10):
            out = await site.agent.run(resume=resume, snapshot_id=snapshot_id)
    except InterlockError as exc:
        refusal: str | None = exc.status
    else:
        refusal = out.error.status if out.error is not None else None
    event(f"refusal: {refusal}")
    if refusal is None:  # a valid answer: the interrupt is used up, pause a fresh turn for the next example
        await site.pause()
        return
    assert refusal not in BAD_STATUSES, refusal
    assert len(site.calls) == calls, "a refused resume ran the tool"
    assert site.rows() == before, "a refused resume changed the store"


def _nested(depth: int, leaf: object) -> object:
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


@settings(max_examples=300, deadline=None)
@given(value=st.one_of(python_like, st.integers(0, 140).map(lambda d: _nested(d, "x")), json_like))
def test_check_json_answers_as_its_full_walk_does(value: Any) -> None:
    """The fast path of ``check_json`` accepts exactly what the iterative walk accepts (the walk gives the message)."""
    from interlock._json import _check_json, check_json  # pyright: ignore[reportPrivateUsage]

    def verdict(check: Any) -> str | None:
        try:
            check(value, "v")
        except InterlockError as exc:
            return exc.message
        return None

    assert verdict(check_json) == verdict(_check_json)
