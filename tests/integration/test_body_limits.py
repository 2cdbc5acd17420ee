"""Issue 25, defect 6: an oversized body is 413 on the inbox as on the agent server, and a Content-Length
over the limit is refused at once, over real HTTP: not after the 30 s the server waits for a body."""

from __future__ import annotations

import asyncio
import json
import pathlib
import sqlite3
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from http_helpers import serve
from inbox_apps import build_app

from interlock import PromptAgent
from interlock.http._server import AgentServer
from interlock.stores.sqlite import SQLiteStore
from interlock.testing import EchoModel


def dump(path: pathlib.Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return list(db.iterdump())


async def lying_request(base: str, path: str, headers: str = "") -> tuple[int, dict[str, str], dict[str, Any]]:
    """POST announcing 99,999,999,999 bytes and sending 2, then wait (at most 5 s) for the answer's head and body."""
    host, port = base.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n{headers}".encode())
        writer.write(b"Content-Length: 99999999999\r\n\r\n{}")
        await writer.drain()
        async with asyncio.timeout(5):  # the server waits 30 s for a body that never comes
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            lines = head.strip().split("\r\n")
            fields = dict(line.lower().split(": ", 1) for line in lines[1:])
            body = await reader.readexactly(int(fields["content-length"]))
    finally:
        writer.close()
    return int(lines[0].split()[1]), fields, json.loads(body)


@pytest.fixture
async def inbox(tmp_path: pathlib.Path) -> AsyncIterator[tuple[str, pathlib.Path, str]]:
    async with SQLiteStore(tmp_path / "inbox.db") as store:
        app, agents = build_app(store)
        out = await agents[0].run("pay bob 5")
        async with serve(app) as url:
            yield url, tmp_path / "inbox.db", out.snapshot_id or ""


async def test_the_inbox_answers_413_to_an_oversized_answer(inbox: tuple[str, pathlib.Path, str]) -> None:
    url, path, snapshot_id = inbox
    before = dump(path)
    big = b'{"decision": "approve", "reason": "' + b"x" * 2_000_000 + b'"}'
    async with httpx.AsyncClient(base_url=url, headers={"x-user": "ann"}, timeout=30) as c:
        api = await c.post(
            f"/api/interrupts/{snapshot_id}/answer", content=big, headers={"content-type": "application/json"}
        )
        c.cookies.set("interlock_csrf", "x")
        form = await c.post(f"/interrupts/{snapshot_id}/answer", data={"csrf": "x", "reason": "x" * 2_000_000})
    assert api.status_code == 413 and api.json()["status"] == "RESOURCE_EXHAUSTED", api.text[:200]
    assert "limit of 1000000 bytes" in api.json()["message"]
    assert form.status_code == 413, form.text[:200]
    assert dump(path) == before


async def test_the_inbox_refuses_a_lying_content_length_at_once(inbox: tuple[str, pathlib.Path, str]) -> None:
    url, path, snapshot_id = inbox
    before = dump(path)
    code, fields, body = await lying_request(url, f"/api/interrupts/{snapshot_id}/answer", "x-user: ann\r\n")
    assert code == 413 and fields["connection"] == "close"
    assert body["status"] == "RESOURCE_EXHAUSTED" and "limit" in body["message"]
    assert dump(path) == before


async def test_the_agent_server_refuses_a_lying_content_length_at_once() -> None:
    async with serve(AgentServer([PromptAgent("echo", EchoModel())])) as url:
        code, fields, body = await lying_request(url, "/echo")
        assert code == 413 and fields["connection"] == "close"
        assert body["status"] == "RESOURCE_EXHAUSTED" and "limit of 10000000 bytes" in body["message"]
        async with httpx.AsyncClient(base_url=url, timeout=10) as c:  # and the server serves on
            r = await c.post("/echo", json={"data": {"message": {"role": "user", "content": [{"text": "hi"}]}}})
            assert r.status_code == 200, r.text
