"""Fuzzed A2A requests at ``interlock serve --a2a`` (a uvicorn process of its own): refused cleanly, nothing changed.

The requests are JSON-RPC bodies built from the official ``a2a-sdk`` types (``SendMessage``,
``SendStreamingMessage``, ``GetTask``, ``CancelTask``, ``SubscribeToTask`` and the rest) with
random parts, DataParts, task and context ids and answers aimed at a paused, a completed and a
canceled task, plus random bodies. None of them is an answer the paused task could take, or a
message that could start a task, so every one must be refused or read: never a 5xx, never a
JSON-RPC internal error (``-32603``) or an ``INTERNAL`` status, no traceback in the server's
log, and afterwards the store's rows are the same and the tool never ran.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import sqlite3
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers import new_data_part, new_text_part
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a_apps import runs
from google.protobuf import json_format
from google.protobuf.message import Message as Proto
from http_helpers import ServerProcess, serve_process
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonrpc.jsonrpc2 import JSONRPC20Request  # pyright: ignore[reportMissingTypeStubs]
from where import KIT

from interlock.http._sse import EventParser

pytestmark = pytest.mark.slow
INTERNAL = -32603


@dataclass(frozen=True)
class Tasks:
    paused: Task
    completed: Task
    canceled: Task


@dataclass
class Served:
    server: ServerProcess
    folder: pathlib.Path
    tasks: Tasks


def rows(folder: pathlib.Path) -> list[str]:
    """Every row of the store, as SQL (the SQLite file the served agents share)."""
    with sqlite3.connect(folder / "store.db") as db:
        return list(db.iterdump())


async def _setup(url: str) -> Tasks:
    """A paused, a completed and a canceled banker task (through the SDK's client)."""
    async with httpx.AsyncClient(timeout=30) as http:
        client = await create_client(f"{url}/a2a/banker", ClientConfig(streaming=False, httpx_client=http))

        async def send(part: Part, task: Task | None = None) -> Task:
            msg = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[part])
            if task is not None:
                msg.task_id, msg.context_id = task.id, task.context_id
            async for response in client.send_message(SendMessageRequest(message=msg)):
                return response.task
            raise AssertionError("no task")

        paused, completed, canceled = [await send(new_text_part(who)) for who in ("ann", "bob", "cy")]
        completed = await send(new_data_part({"answers": {"t1": {"decision": "approve"}}}), completed)
        canceled = await client.cancel_task(CancelTaskRequest(id=canceled.id))
        await client.close()
    assert paused.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert completed.status.state == TaskState.TASK_STATE_COMPLETED
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    return Tasks(paused=paused, completed=completed, canceled=canceled)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("a2a_fuzz")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("A2A_DIR", str(folder))
        command = [sys.executable, "-m", "interlock", "serve", "a2a_apps:agents", "--a2a", "--a2a-wait", "5"]
        with serve_process([*command, "--port", "0"], cwd=KIT) as server:
            yield Served(server=server, folder=folder, tasks=asyncio.run(_setup(server.url)))


# strategies ------------------------------------------------------------------------------------

text: st.SearchStrategy[str] = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
not_a_string = json_values.filter(lambda v: not isinstance(v, str))
not_an_approval = json_values.filter(lambda v: not isinstance(v, dict) or ("approved" not in v and v != {}))


def _merged(decided: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    return {**extra, **decided}


def _answers_part(answers: Any) -> Part:
    return new_data_part({"answers": answers})


def _raw_part(raw: bytes) -> Part:
    return Part(raw=raw, media_type="application/octet-stream")


def _url_part(url: str) -> Part:
    return Part(url=url)


def bad_answers() -> st.SearchStrategy[Any]:
    """Answers the paused banker call (``transfer``, output text, resume payload ``{approved}``) cannot take."""
    decided = st.one_of(
        st.fixed_dictionaries({"decision": text.filter(lambda d: d not in ("approve", "reject", "respond"))}),
        st.fixed_dictionaries({"decision": st.just("respond"), "output": not_a_string}),
        st.fixed_dictionaries(
            {"decision": st.sampled_from(["approve", "reject", "restart", "edit"]), "payload": not_an_approval}
        ),
        st.fixed_dictionaries({"decision": st.just("respond")}),
    )
    extra = st.dictionaries(st.sampled_from(["resumeToken", "reason", "ref", "nope"]), json_values, max_size=2)
    answer = st.one_of(json_values, st.builds(_merged, decided, extra))
    refs = st.sampled_from(["t1", "transfer", "zz"]) | text
    return st.dictionaries(refs, answer, max_size=3) | json_values


def parts_strategy() -> st.SearchStrategy[list[Part]]:
    data = st.one_of(
        st.builds(_answers_part, bad_answers()),
        st.builds(new_data_part, st.dictionaries(text, json_values, max_size=3)),
    )
    files = st.one_of(
        st.builds(_raw_part, st.binary(max_size=8)),
        st.builds(_url_part, text),
    )
    return st.lists(data | files, max_size=3)


@st.composite
def messages(draw: st.DrawFn, tasks: Tasks) -> Message:
    """A message no task can act on: on a task it answers badly; without one it has no part the agent reads."""
    on = draw(st.sampled_from([tasks.paused, tasks.completed, tasks.canceled, None]))
    context = draw(st.sampled_from([on.context_id if on else "", tasks.paused.context_id, ""]) | text)
    msg = Message(message_id=draw(text), role=draw(st.sampled_from([Role.ROLE_USER, Role.ROLE_AGENT])))
    msg.context_id = context
    if on is None:
        msg.task_id = draw(st.sampled_from(["", "nope"]))
        msg.parts.extend(draw(st.lists(st.builds(_url_part, text), max_size=2)))
        return msg
    msg.task_id = on.id if draw(st.booleans()) else draw(text.filter(bool))  # "" would start a task
    msg.parts.extend(draw(parts_strategy()))
    if on is not tasks.paused and draw(st.booleans()):
        msg.parts.append(new_text_part(draw(text)))
    return msg


@st.composite
def sdk_requests(draw: st.DrawFn, tasks: Tasks) -> tuple[str, Proto]:
    """A JSON-RPC method and its request, built with the SDK's types."""
    ids = st.sampled_from([tasks.paused.id, tasks.completed.id, tasks.canceled.id, "nope", ""]) | text
    settled = st.sampled_from([tasks.completed.id, tasks.canceled.id, "nope", ""]) | text
    method = draw(
        st.sampled_from(["SendMessage", "SendStreamingMessage", "GetTask", "CancelTask", "Subscribe", "List"])
    )
    if method in ("SendMessage", "SendStreamingMessage"):
        config = SendMessageConfiguration(return_immediately=draw(st.booleans()))
        return method, SendMessageRequest(message=draw(messages(tasks)), configuration=config)
    if method == "GetTask":
        return method, GetTaskRequest(id=draw(ids), history_length=draw(st.integers(0, 5)))
    if method == "CancelTask":  # never the paused task: canceling it is an answer
        return method, CancelTaskRequest(id=draw(settled))
    if method == "Subscribe":
        return "SubscribeToTask", SubscribeToTaskRequest(id=draw(ids))
    return "ListTasks", ListTasksRequest(context_id=draw(text))


@st.composite
def bodies(draw: st.DrawFn, tasks: Tasks) -> Any:
    choice = draw(st.integers(0, 3))
    if choice <= 1:
        method, request = draw(sdk_requests(tasks))
        rpc: Any = JSONRPC20Request(method=method, params=json_format.MessageToDict(request), _id=draw(text))
        return dict(rpc.data)
    methods = st.sampled_from(["SendMessage", "GetTask", "CancelTask", "ListTasks", "GetExtendedAgentCard"]) | text
    if choice == 2:
        return {"jsonrpc": "2.0", "id": draw(json_values), "method": draw(methods), "params": draw(json_values)}
    return draw(json_values | st.dictionaries(text, json_values, max_size=4))


# the test --------------------------------------------------------------------------------------


def check(frame: Any) -> None:
    """One JSON-RPC response (or stream frame): no internal error, no INTERNAL status."""
    assert isinstance(frame, dict), frame
    body = cast(dict[str, Any], frame)
    error: Any = body.get("error")
    if error is not None:
        assert error["code"] != INTERNAL, error
        assert "INTERNAL" not in json.dumps(error.get("data")), error
        return
    assert "INTERNAL" not in json.dumps(body.get("result")), frame


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.data(),
    version=st.sampled_from(["1.0", "1.0", "1.0", "0.3", "9"]),
    agent=st.sampled_from(["banker", "asker", "nobody"]),
)
def test_fuzzed_requests_are_refused_cleanly_and_change_nothing(
    served: Served, data: st.DataObject, version: str, agent: str
) -> None:
    body = data.draw(bodies(served.tasks))
    if agent == "asker" and "SendMessage" in json.dumps(body):
        agent = "banker"  # the banker's tasks are the ones aimed at
    headers = {"A2A-Version": version, "Content-Type": "application/json"}
    got = httpx.post(f"{served.server.url}/a2a/{agent}", content=json.dumps(body), headers=headers, timeout=30)
    assert got.status_code < 500, got.text
    if got.status_code == 404:
        assert agent == "nobody"
        return
    if "text/event-stream" in got.headers.get("content-type", ""):
        frames = [json.loads(e) for e in EventParser().feed(got.content, final=True)]
        assert frames, got.text
        for frame in frames:
            check(frame)
        return
    check(got.json())


@pytest.fixture(scope="module", autouse=True)
def nothing_changed(served: Served) -> Iterator[None]:
    """After every example: the store's rows as before, the tool never ran again, no traceback logged."""
    before, ran = rows(served.folder), runs(served.folder)
    yield
    assert rows(served.folder) == before
    assert runs(served.folder) == ran == ["bob 5 True"]
    log = "".join(served.server.log)
    assert "Traceback" not in log and "Unhandled exception" not in log, log[-4000:]
