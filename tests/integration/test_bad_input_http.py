"""Hostile input over real HTTP (uvicorn): a body shorter than its Content-Length, and an oversized one from the client.

The in-process cases of the same hardening are in ``unit/test_bad_input.py``.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from http_helpers import serve

from interlock import PromptAgent
from interlock.errors import ResourceExhaustedError
from interlock.http._client import RemoteAgent
from interlock.http._server import AgentServer
from interlock.testing import EchoModel


async def test_15_a_body_shorter_than_its_content_length_times_out_with_408() -> None:
    app = AgentServer([PromptAgent("echo", EchoModel())], body_timeout=0.3)
    async with serve(app) as base:
        host, port = base.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            writer.write(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n")
            writer.write(b"Content-Length: 100\r\n\r\n{}")
            await writer.drain()
            async with asyncio.timeout(5):
                raw = await reader.read()  # the server answers and closes the connection
        finally:
            writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), raw
    assert b"connection: close" in head.lower()
    assert json.loads(body)["status"] == "DEADLINE_EXCEEDED"


async def test_15_an_oversized_body_is_resource_exhausted_in_the_client() -> None:
    app = AgentServer([PromptAgent("echo", EchoModel())], max_body=100_000)
    async with serve(app) as base, RemoteAgent(f"{base}/echo") as agent:
        with pytest.raises(ResourceExhaustedError, match="larger than"):
            await agent.run("x" * 5_000_000)
        out = await agent.run("still fine")  # and the next request is served
        assert out.text == "Echo: still fine"
