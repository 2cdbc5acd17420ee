"""Logging: ``interlock.*`` records with structured fields, silent by default, JSON on the command line."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from pydantic import BaseModel
from test_cli import free_port

from interlock import Message, PromptAgent, Resume, ToolContext, ToolRequestPart, tool
from interlock.errors import UnavailableError
from interlock.models import ModelResponse, Usage
from interlock.models._retry import RetryPolicy, call_with_retries
from interlock.stores.sqlite import SQLiteStore
from interlock.telemetry import configure_logging
from interlock.testing import ScriptedModel


class Approval(BaseModel):
    approved: bool


@tool
async def transfer(to: str, ctx: ToolContext[Any], approval: Approval | None) -> str:
    """Send money after an approval."""
    if approval is None:
        ctx.interrupt({"to": to})
    return "sent"


PAY = Message(role="model", content=[ToolRequestPart(name="transfer", ref="t1", input="bob")])
APPROVE = Resume(
    restart=[ToolRequestPart(name="transfer", ref="t1", input="bob", metadata={"resumed": {"approved": True}})]
)


def records(caplog: pytest.LogCaptureFixture, logger: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == logger]


def fields(record: logging.LogRecord, *names: str) -> tuple[object, ...]:
    """The record's ``extra`` fields ``names``."""
    return tuple(record.__dict__[name] for name in names)


async def test_a_cycle_logs_model_calls_tools_claims_interrupts_and_resumes(
    caplog: pytest.LogCaptureFixture, tmp_path: pathlib.Path
) -> None:
    caplog.set_level(logging.DEBUG, logger="interlock")
    done = ModelResponse(message=Message.model("Sent."), usage=Usage(input_tokens=30, output_tokens=4))
    async with SQLiteStore(tmp_path / "s.db") as store:
        agent = PromptAgent("banker", ScriptedModel([PAY, done]), tools=[transfer], store=store)
        out = await agent.run("pay bob")
        assert out.snapshot_id is not None
        final = await agent.run(resume=APPROVE, snapshot_id=out.snapshot_id, context={"identity": "alice"})
    assert final.finish_reason == "stop"

    calls = records(caplog, "interlock.models")
    assert [r.levelno for r in calls] == [logging.INFO, logging.INFO]
    last = calls[-1]
    assert fields(last, "provider", "model", "finish_reason") == ("test", "scripted", "stop")
    assert fields(last, "input_tokens", "output_tokens") == (30, 4)
    (duration,) = fields(last, "duration_ms")
    assert isinstance(duration, float) and duration >= 0

    tools = records(caplog, "interlock.tools")
    assert [fields(r, "tool", "ref", "outcome") for r in tools] == [
        ("transfer", "t1", "interrupted"),
        ("transfer", "t1", "ok"),
    ]
    paused = [r for r in records(caplog, "interlock.agents") if r.getMessage().startswith("turn paused")]
    assert [fields(r, "tool", "snapshot_id", "interrupt_kind") for r in paused] == [
        ("transfer", out.snapshot_id, "tool")
    ]
    (resume,) = [r for r in records(caplog, "interlock.agents") if r.getMessage().startswith("resume")]
    assert fields(resume, "identity", "holder", "verbs") == ("alice", final.snapshot_id, ["restart"])
    (claim,) = records(caplog, "interlock.claims")
    assert fields(claim, "snapshot_id", "holder") == (out.snapshot_id, final.snapshot_id)


async def test_retries_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="interlock")
    attempts = 0

    async def flaky() -> str:
        nonlocal attempts
        attempts += 1
        if attempts < 3:
            raise ConnectionError("down")
        return "ok"

    def as_unavailable(exc: Exception) -> UnavailableError | None:
        return UnavailableError(f"could not reach test: {exc}") if isinstance(exc, ConnectionError) else None

    policy = RetryPolicy(max_retries=3, initial_delay=0.01, max_delay=0.05)
    assert await call_with_retries(flaky, policy=policy, map_error=as_unavailable) == "ok"
    retries = records(caplog, "interlock.models")
    assert [(r.levelno, *fields(r, "status", "attempt")) for r in retries] == [
        (logging.WARNING, "UNAVAILABLE", 1),
        (logging.WARNING, "UNAVAILABLE", 2),
    ]


async def test_store_errors_are_logged(caplog: pytest.LogCaptureFixture, tmp_path: pathlib.Path) -> None:
    caplog.set_level(logging.DEBUG, logger="interlock")
    store = SQLiteStore(tmp_path / "no-such-dir" / "s.db")
    with pytest.raises(Exception) as raised:
        await store.load("x")
    status = getattr(raised.value, "status", None)
    (record,) = records(caplog, "interlock.stores")
    assert record.levelno == logging.ERROR
    assert fields(record, "store", "status") == ("sqlite", status)
    assert status == "FAILED_PRECONDITION" and "no-such-dir" in record.getMessage()
    await store.close()


def test_the_library_prints_nothing_by_default(tmp_path: pathlib.Path) -> None:
    """A failing turn logs a warning; without logging configured, none of it reaches stderr."""
    script = textwrap.dedent(
        """
        import asyncio
        from interlock import Message, PromptAgent, ToolRequestPart, tool
        from interlock.testing import ScriptedModel

        @tool
        async def explode(x: int) -> int:
            \"\"\"Fails.\"\"\"
            raise RuntimeError("boom")

        ask = Message(role="model", content=[ToolRequestPart(name="explode", ref="e", input=1)])
        out = asyncio.run(PromptAgent("ops", ScriptedModel([ask]), tools=[explode]).run("go", raise_on_error=False))
        assert out.finish_reason == "failed", out
        import logging
        assert logging.getLogger("interlock.agents").isEnabledFor(logging.WARNING)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


def test_json_formatter_writes_extra_fields_and_the_trace() -> None:
    stream, root = io.StringIO(), logging.getLogger()
    before = list(root.handlers)
    configure_logging("info", "json", stream=io.StringIO())
    (first,) = [h for h in root.handlers if h not in before]
    others = [h for h in root.handlers if h is not first]  # pytest's own (an earlier call's handler is gone)
    configure_logging("info", "json", stream=stream)  # replaces the first, keeps the others
    (mine,) = [h for h in root.handlers if h not in others]
    assert root.handlers == [*others, mine] and first not in root.handlers
    try:
        log = logging.getLogger("interlock.test")
        log.debug("hidden")
        tracer = TracerProvider().get_tracer("t")
        with tracer.start_as_current_span("s") as span:
            log.info("model call: %s", "x", extra={"provider": "openai", "duration_ms": 12.5, "tags": ["a"]})
        try:
            raise ValueError("bad")
        except ValueError:
            log.exception("it failed")
    finally:
        root.removeHandler(mine)
        root.setLevel(logging.WARNING)
    first, second = [json.loads(line) for line in stream.getvalue().splitlines()]
    context = span.get_span_context()
    assert first["message"] == "model call: x" and first["level"] == "INFO" and first["logger"] == "interlock.test"
    assert (first["provider"], first["duration_ms"], first["tags"]) == ("openai", 12.5, ["a"])
    assert (first["trace_id"], first["span_id"]) == (f"{context.trace_id:032x}", f"{context.span_id:016x}")
    assert "args" not in first and "msg" not in first and "trace_id" not in second
    assert "ValueError: bad" in second["exception"]


def test_configure_logging_refuses_an_unknown_level() -> None:
    with pytest.raises(ValueError, match="unknown log level 'loud'"):
        configure_logging("loud")


@pytest.mark.slow
async def test_serve_with_json_logs_writes_one_json_object_per_stderr_line(tmp_path: pathlib.Path) -> None:
    (tmp_path / "echo_app.py").write_text(
        "from interlock import InMemoryStore, PromptAgent\n"
        "from interlock.testing import EchoModel\n"
        "agents = [PromptAgent('echo', EchoModel(), store=InMemoryStore())]\n"
    )
    port = free_port()
    command = [sys.executable, "-m", "interlock", "serve", "echo_app:agents", "--port", str(port)]
    proc = subprocess.Popen(
        [*command, "--log-format", "json", "--log-level", "debug"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            async with asyncio.timeout(30):
                while True:
                    assert proc.poll() is None, proc.communicate()
                    try:
                        await http.post("/echo/getSnapshot", json={"data": {"snapshotId": "x"}})
                        break
                    except httpx.TransportError:
                        await asyncio.sleep(0.1)
            body = {"data": {"message": {"role": "user", "content": [{"text": "hi"}]}}, "init": {}}
            response = await http.post("/echo", json=body, headers={"Accept": "text/event-stream"})
            assert response.status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = await asyncio.to_thread(proc.communicate, timeout=30)
    lines = [json.loads(line) for line in err.splitlines()]  # every line is a JSON object
    assert lines and all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    (turn,) = [
        line for line in lines if line["logger"] == "interlock.http.server" and line["message"].startswith("turn ")
    ]
    assert (turn["agent"], turn["finish_reason"]) == ("echo", "stop") and turn["snapshot_id"]
    (model,) = [line for line in lines if line["logger"] == "interlock.models"]
    assert model["provider"] == "test" and isinstance(model["duration_ms"], float)
    assert any(line["logger"].startswith("uvicorn") for line in lines)  # uvicorn's own records are JSON too
