"""The agent the HTTP benchmarks serve, and the requests of one interrupt cycle.

Served from this folder: ``BENCH_STORE=memory interlock serve served_bank:agent`` (or
``BENCH_STORE=postgresql://...`` / a SQLite path). The model asks to pay bob after a user
message and says "paid" after the tool answered; the tool pauses for approval. A cycle is
two requests: the turn that pauses, then the resume that approves it (by snapshot id).
"""

from __future__ import annotations

import json
import os
from typing import Any

from bank import transfer

from interlock import InMemoryStore, Message, PromptAgent, ToolRequestPart
from interlock.models import ModelRequest, ModelResponse
from interlock.stores import SessionStore

CALL = {"name": "transfer", "ref": "t1", "input": {"to": "bob", "amount": 5}}
PAUSE_BODY = json.dumps({"data": {"message": {"role": "user", "content": [{"text": "pay bob 5"}]}}}).encode()


def resume_body(snapshot_id: str) -> bytes:
    """The request body that approves the transfer the snapshot paused on."""
    restart = {"toolRequest": CALL, "metadata": {"resumed": {"approved": True}}}
    return json.dumps({"data": {"resume": {"restart": [restart]}}, "init": {"snapshotId": snapshot_id}}).encode()


class BankModel:
    """Asks to pay bob after a user message, says "paid" after the tool's answer."""

    name = "bench/bank"

    async def generate(self, request: ModelRequest, *, on_chunk: Any = None) -> ModelResponse:
        if request.messages[-1].role == "user":
            call = ToolRequestPart(name="transfer", ref="t1", input={"to": "bob", "amount": 5})
            return ModelResponse(message=Message(role="model", content=[call]), finish_reason="stop")
        return ModelResponse(message=Message.model("paid"), finish_reason="stop")


def store_from_env() -> SessionStore:
    url = os.environ.get("BENCH_STORE", "memory")
    if url == "memory":
        return InMemoryStore()
    if url.startswith("postgres"):
        from interlock.stores.postgres import PostgresStore

        return PostgresStore(url, max_size=int(os.environ.get("BENCH_POOL", "20")))
    from interlock.stores.sqlite import SQLiteStore

    return SQLiteStore(url)


agent = PromptAgent("bank", BankModel(), tools=[transfer], store=store_from_env())
