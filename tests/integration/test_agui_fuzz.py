"""Fuzzed ``RunAgentInput`` bodies at the AG-UI route, over real HTTP: never a 5xx, never INTERNAL, never a hang.

Every answer is either a 4xx before the stream (only a body the server will not read) or a
``200`` event stream whose every event ``ag_ui.core`` parses and whose last event ends the
run (``RUN_FINISHED`` or ``RUN_ERROR`` with a canonical status other than INTERNAL).
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from ag_ui.core import Event
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from inbox_apps import build_agents, who
from pydantic import TypeAdapter

from interlock.http import AGUI, AgentServer
from interlock.http._sse import EventParser
from interlock.http._status import HTTP_STATUS
from interlock.stores.sqlite import SQLiteStore

pytestmark = pytest.mark.slow
EVENT: TypeAdapter[Any] = TypeAdapter(Event)
THREADS = ("paused-bank", "paused-ops", "paused-help", "fresh")


class Served:
    """The AG-UI route on uvicorn in a thread of its own, with paused threads to aim resumes at."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        self.ready = threading.Event()
        self.server: uvicorn.Server | None = None
        self.thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        async with SQLiteStore(self.path) as store:
            agents = build_agents(store)
            for agent, thread, text in zip(agents, THREADS, ("pay a 1 and b 2", "delete x", "ask why"), strict=False):
                await agent.run(text, session_id=thread)
            app = AgentServer(agents, context=who, protocols=[AGUI()])
            config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off", ws="none")
            self.server = uvicorn.Server(config)
            serving = asyncio.ensure_future(self.server.serve())
            while not self.server.started and not serving.done():
                await asyncio.sleep(0.01)
            self.ready.set()
            await serving

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.servers[0].sockets[0].getsockname()[1]}"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    s = Served(tmp_path_factory.mktemp("fuzz") / "agui.db")
    s.thread.start()
    if not s.ready.wait(30):
        pytest.fail("the server did not start")
    yield s
    assert s.server is not None
    s.server.should_exit = True
    s.thread.join(30)


text: st.SearchStrategy[Any] = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=20)
json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=10,
)
ids: st.SearchStrategy[Any] = st.sampled_from(["t1", "t2", "d1", "q1", "zz"]) | text
content: st.SearchStrategy[Any] = text | st.sampled_from(
    ["pay c 3", "pay d 1 and e 2", "ask what", "delete y", "hello"]
)
messages: st.SearchStrategy[Any] = st.lists(
    st.fixed_dictionaries(
        {"id": text, "role": st.sampled_from(["user", "assistant", "tool", "system", "developer", "nobody"])},
        optional={"content": content | st.lists(json_values, max_size=2) | json_values, "toolCallId": text},
    ),
    max_size=3,
)
resume: st.SearchStrategy[Any] = st.lists(
    st.fixed_dictionaries(
        {"interruptId": ids, "status": st.sampled_from(["resolved", "cancelled", "maybe"])},
        optional={"payload": json_values | st.just({"approved": True}), "metadata": json_values},
    ),
    max_size=3,
)
inputs: st.SearchStrategy[Any] = st.fixed_dictionaries(
    {"threadId": st.sampled_from(THREADS) | text, "runId": text, "messages": messages},
    optional={
        "resume": resume | json_values,
        "state": json_values,
        "forwardedProps": json_values,
        "tools": json_values,
        "context": json_values,
        "parentRunId": json_values,
    },
)
bodies: st.SearchStrategy[Any] = inputs | st.dictionaries(text, json_values, max_size=4) | json_values


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=bodies, agent=st.sampled_from(["bank", "ops", "helpdesk", "nobody"]))
def test_fuzzed_runs_never_fail_inside(served: Served, body: Any, agent: str) -> None:
    got = httpx.post(f"{served.url}/ag-ui/{agent}", content=json.dumps(body), headers={"x-user": "fuzz"}, timeout=30)
    assert got.status_code < 500, got.text
    if got.status_code != 200:
        assert got.json()["status"] in HTTP_STATUS
        return
    parser = EventParser()
    events = [EVENT.validate_json(e) for e in parser.feed(got.content, final=True)]
    assert events, got.text
    last = events[-1]
    assert last.type.value in ("RUN_FINISHED", "RUN_ERROR"), got.text
    if last.type.value == "RUN_ERROR":
        assert last.code in HTTP_STATUS and last.code != "INTERNAL", last.message
