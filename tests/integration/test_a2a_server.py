"""The official a2a-sdk client drives ``interlock serve --a2a`` (a uvicorn process of its own).

The card is fetched; a message that pauses gives an input-required task carrying the interrupts
extension's DataPart; an answer completes it (the tool ran once, counted in an append-only
file); a second answer is refused naming who answered; a canceled paused task is canceled
and its tool never ran; GetTask reads the store; streaming gives the same task.
"""

from __future__ import annotations

import contextlib
import pathlib
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from a2a.client import ClientConfig, create_client
from a2a.client.client import Client
from a2a.helpers import get_data_parts, get_text_parts, new_data_part, new_text_part
from a2a.types import CancelTaskRequest, GetTaskRequest, Message, Role, SendMessageRequest, Task, TaskState
from a2a.utils.errors import A2AError
from a2a_apps import runs
from http_helpers import ServerProcess, serve_process
from where import KIT

from interlock.http._a2a import EXTENSION_URI

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return tmp_path_factory.mktemp("a2a")


@pytest.fixture(scope="module")
def server(folder: pathlib.Path, monkeypatch_module: pytest.MonkeyPatch) -> Iterator[ServerProcess]:
    monkeypatch_module.setenv("A2A_DIR", str(folder))
    command = [sys.executable, "-m", "interlock", "serve", "a2a_apps:agents", "--a2a", "--port", "0"]
    with serve_process(command, cwd=KIT) as served:
        yield served


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@contextlib.asynccontextmanager
async def client_for(server: ServerProcess, agent: str, *, streaming: bool = False) -> AsyncGenerator[Client]:
    """The a2a-sdk client of ``agent``, from its card (JSON-RPC; streaming or not)."""
    async with httpx.AsyncClient(timeout=30) as http:
        config = ClientConfig(streaming=streaming, httpx_client=http)
        client = await create_client(f"{server.url}/a2a/{agent}", config)
        try:
            yield client
        finally:
            await client.close()


@pytest_asyncio.fixture(loop_scope="module")
async def banker(server: ServerProcess) -> AsyncIterator[Client]:
    async with client_for(server, "banker") as client:
        yield client


def message(*parts: Any, task: Task | None = None) -> SendMessageRequest:
    msg = Message(message_id=f"m-{id(parts)}", role=Role.ROLE_USER, parts=list(parts))
    if task is not None:
        msg.task_id, msg.context_id = task.id, task.context_id
    return SendMessageRequest(message=msg)


async def send(client: Client, request: SendMessageRequest) -> Task:
    last: Task | None = None
    async for response in client.send_message(request):
        if response.HasField("task"):
            last = response.task
        elif response.HasField("status_update") and last is not None:
            last.status.CopyFrom(response.status_update.status)
    assert last is not None
    return last


def approve() -> Any:
    return new_data_part({"answers": {"t1": {"decision": "approve"}}})


async def test_the_card_names_the_agent_its_endpoint_and_the_interrupts_extension(server: ServerProcess) -> None:
    async with httpx.AsyncClient() as http:
        card = (await http.get(f"{server.url}/a2a/banker/.well-known/agent-card.json")).json()
    assert card["name"] == "banker" and card["description"] == "pays people"
    assert card["supportedInterfaces"][0]["url"] == f"{server.url}/a2a/banker"
    assert [e["uri"] for e in card["capabilities"]["extensions"]] == [EXTENSION_URI]


async def test_a_paused_task_asks_with_the_data_part_and_an_answer_completes_it_once(
    banker: Client, folder: pathlib.Path
) -> None:
    task = await send(banker, message(new_text_part("alice")))
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    status = task.status.message
    assert list(status.extensions) == [EXTENSION_URI]
    assert "Send 5 to alice?" in get_text_parts(status.parts)[0]
    (data,) = get_data_parts(status.parts)
    (entry,) = data["interrupts"]
    assert (entry["tool"], entry["ref"], entry["input"]) == ("transfer", "t1", {"to": "alice", "amount": 5.0})
    assert entry["interrupt"] == {"message": "Send 5 to alice?"}
    assert set(entry["decisions"]) == {"approve", "reject", "respond", "restart"}
    assert "oneOf" in entry["answerSchema"]

    done = await send(banker, message(approve(), task=task))
    assert done.id == task.id and done.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_text_parts(done.status.message.parts) == ['done: ["sent"]']
    assert runs(folder).count("alice 5 True") == 1
    read = await banker.get_task(GetTaskRequest(id=task.id))
    assert read.status.state == TaskState.TASK_STATE_COMPLETED

    with pytest.raises(A2AError, match="already answered"):
        await send(banker, message(approve(), task=task))
    assert runs(folder).count("alice 5 True") == 1


async def test_canceling_a_paused_task_cancels_it_and_its_tool_never_runs(banker: Client, folder: pathlib.Path) -> None:
    task = await send(banker, message(new_text_part("carol")))
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    canceled = await banker.cancel_task(CancelTaskRequest(id=task.id))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    assert (await banker.get_task(GetTaskRequest(id=task.id))).status.state == TaskState.TASK_STATE_CANCELED
    with pytest.raises(A2AError, match="already canceled"):
        await send(banker, message(approve(), task=task))
    assert not [line for line in runs(folder) if line.startswith("carol")]


async def test_text_answers_only_a_string_question_and_is_refused_naming_the_data_part(
    server: ServerProcess, banker: Client
) -> None:
    task = await send(banker, message(new_text_part("dave")))
    with pytest.raises(A2AError, match='"answers"'):
        await send(banker, message(new_text_part("yes please"), task=task))
    async with client_for(server, "asker", streaming=True) as asker:
        asked = await send(asker, message(new_text_part("lunch")))
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        (data,) = get_data_parts(asked.status.message.parts)
        assert data["interrupts"][0]["answerSchema"]["properties"]["output"] == {"type": "string"}
        done = await send(asker, message(new_text_part("pizza"), task=asked))
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        assert get_text_parts(done.status.message.parts) == ['done: ["pizza"]']


async def test_an_unknown_task_is_not_found(banker: Client) -> None:
    with pytest.raises(A2AError, match="no snapshot|not found|NOT_FOUND"):
        await banker.get_task(GetTaskRequest(id="nope"))
