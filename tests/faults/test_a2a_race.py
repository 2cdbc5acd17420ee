"""8 a2a-sdk clients answer one input-required task of `interlock serve --a2a` at once: one wins, one run."""

from __future__ import annotations

import asyncio
import pathlib
import sys
from collections.abc import Iterator

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.client.client import Client
from a2a.helpers import new_data_part, new_text_part
from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest, Task, TaskState
from a2a.utils.errors import A2AError
from a2a_apps import runs
from http_helpers import ServerProcess, serve_process
from where import KIT

pytestmark = [pytest.mark.slow]


@pytest.fixture
def server(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ServerProcess]:
    monkeypatch.setenv("A2A_DIR", str(tmp_path))
    command = [sys.executable, "-m", "interlock", "serve", "a2a_apps:agents", "--a2a", "--port", "0"]
    with serve_process(command, cwd=KIT) as served:
        yield served


def request(part: Part, task: Task | None = None, n: int = 0) -> SendMessageRequest:
    msg = Message(message_id=f"m{n}", role=Role.ROLE_USER, parts=[part])
    if task is not None:
        msg.task_id, msg.context_id = task.id, task.context_id
    return SendMessageRequest(message=msg)


async def first_task(client: Client, req: SendMessageRequest) -> Task:
    async for response in client.send_message(req):
        return response.task
    raise AssertionError("no response")


async def test_eight_racing_answers_have_one_winner(server: ServerProcess, tmp_path: pathlib.Path) -> None:
    async with httpx.AsyncClient(timeout=60) as http:
        config = ClientConfig(streaming=False, httpx_client=http)
        clients = [await create_client(f"{server.url}/a2a/banker", config) for _ in range(8)]
        task = await first_task(clients[0], request(new_text_part("erin")))
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        approve = new_data_part({"answers": {"t1": {"decision": "approve"}}})

        async def answer(n: int) -> str:
            try:
                done = await first_task(clients[n], request(approve, task, n + 1))
            except A2AError as exc:
                return f"refused: {exc}"
            return TaskState.Name(done.status.state)

        outcomes = await asyncio.gather(*(answer(n) for n in range(8)))
        assert outcomes.count("TASK_STATE_COMPLETED") == 1, outcomes
        refused = [o for o in outcomes if o.startswith("refused")]
        assert len(refused) == 7 and all("answered" in o for o in refused), outcomes
        assert runs(tmp_path) == ["erin 5 True"]
        read = await clients[1].get_task(GetTaskRequest(id=task.id))
        assert read.status.state == TaskState.TASK_STATE_COMPLETED
        for client in clients:
            await client.close()
