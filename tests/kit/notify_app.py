"""The bank the notification and deadline tests share, in the test process and in served or worker processes.

Served: ``NOTIFY_DB=... NOTIFY_HOOK=http://127.0.0.1:PORT/ interlock serve notify_app:server
--webhooks notify_app:webhooks [--deadlines]``. Environment: ``NOTIFY_DB`` (the store: a SQLite
file, or a :mod:`store_kinds` location naming a PostgreSQL schema), ``NOTIFY_HOOK`` (the
receiver), ``NOTIFY_LOG`` (a file each tool run and model call appends a line to),
``NOTIFY_WARN`` (seconds of ``warn_before``, for one ``bank`` that escalates), ``NOTIFY_POLICY``
(``reject``/``respond``/``escalate``; ``all``: three agents ``bank-reject``,
``bank-respond`` and ``bank-escalate``), ``NOTIFY_EXPIRES`` (seconds), ``NOTIFY_LEASE`` (the
webhook lease, seconds).
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

from pydantic import BaseModel

from interlock import Message, PromptAgent, ToolContext, ToolRequestPart, tool
from interlock.agents._host import Host
from interlock.interrupts._signing import Keyring
from interlock.interrupts._tokens import TokenSigner
from interlock.models import ModelRequest, ModelResponse
from interlock.stores import SessionStore
from interlock.tools._expiry import OnExpire

SECRET = "webhook-secret-for-the-tests-0123456789"
KEYRING = Keyring({"k1": SECRET})
TOKENS = TokenSigner({"t1": "token-secret-for-the-tests-0123456789"})
POLICIES = {
    "reject": OnExpire.reject("No one approved in time."),
    "respond": OnExpire.respond("declined by default"),
    "escalate": OnExpire.escalate("managers"),
}


class Transfer(BaseModel):
    to: str
    amount: float


class Approval(BaseModel):
    approved: bool


def _log(log: pathlib.Path | None, line: str) -> None:
    if log is not None:
        with log.open("a") as f:
            f.write(line + "\n")


class BankModel:
    """Asks to pay bob 5 after a user message; after a tool result, says what the tool answered."""

    name = "test/bank"

    def __init__(self, log: pathlib.Path | None = None, agent: str = "bank") -> None:
        self.log = log
        self.suffix = "" if agent == "bank" else f" {agent}"

    async def generate(self, request: ModelRequest, *, on_chunk: Any = None) -> ModelResponse:
        last = request.messages[-1]
        _log(self.log, f"model {last.role}{self.suffix}")
        if last.role == "user":
            call = ToolRequestPart(name="transfer", ref="t1", input={"to": "bob", "amount": 5})
            return ModelResponse(message=Message(role="model", content=[call]), finish_reason="stop")
        outputs = [p.output for p in last.content if p.kind == "tool_response"]
        return ModelResponse(message=Message.model(f"tool said: {outputs}"), finish_reason="stop")


def bank(
    store: SessionStore,
    *,
    log: pathlib.Path | None = None,
    expires_in: float | None = None,
    on_expire: OnExpire | None = None,
    notify: bool = True,
    tokens: bool = True,
    name: str = "bank",
    warn_before: float | None = None,
) -> PromptAgent:
    """The bank agent: ``transfer`` pauses for approval (with the deadline given), then runs.

    Log lines of an agent not named ``bank`` end with its name."""

    @tool(expires_in=expires_in, on_expire=on_expire, warn_before=warn_before)
    async def transfer(req: Transfer, ctx: ToolContext[Any], approval: Approval | None) -> str:
        """Move money once approved."""
        if approval is None:
            ctx.interrupt({"to": req.to, "amount": req.amount})
        _log(log, f"transfer {req.to} {req.amount:g}{'' if name == 'bank' else ' ' + name}")
        return "sent" if approval.approved else "cancelled"

    return PromptAgent(
        name,
        BankModel(log, name),
        tools=[transfer],
        store=store,
        host=Host(notify=notify, resume_tokens=TOKENS if tokens else None),
    )


def _env_path(name: str) -> pathlib.Path | None:
    value = os.environ.get(name)
    return pathlib.Path(value) if value else None


def _served() -> tuple[Any, Any]:
    """The served app and its webhooks, from the environment (only when NOTIFY_DB is set)."""
    from store_kinds import store_at

    from interlock.http._server import AgentServer
    from interlock.notify._webhooks import Endpoint, Webhooks

    store = store_at(os.environ["NOTIFY_DB"])
    policy = os.environ.get("NOTIFY_POLICY")
    expires = float(os.environ["NOTIFY_EXPIRES"]) if os.environ.get("NOTIFY_EXPIRES") else None
    log = _env_path("NOTIFY_LOG")
    warn = float(os.environ["NOTIFY_WARN"]) if os.environ.get("NOTIFY_WARN") else None
    if warn is not None:
        agents = [bank(store, log=log, expires_in=expires, warn_before=warn, on_expire=POLICIES["escalate"])]
    elif policy == "all":
        agents = [bank(store, log=log, expires_in=expires, on_expire=p, name=f"bank-{k}") for k, p in POLICIES.items()]
    else:
        agents = [bank(store, log=log, expires_in=expires, on_expire=POLICIES[policy] if policy else None)]
    hook = os.environ.get("NOTIFY_HOOK", "http://127.0.0.1:9/")
    hooks = Webhooks(
        [Endpoint(url=hook), Endpoint(url=hook.rstrip("/") + "/managers", groups=frozenset({"managers"}))],
        KEYRING,
        lease=float(os.environ.get("NOTIFY_LEASE", "60")),
        retry_base=0.2,
        retry_cap=1.0,
        poll_interval=0.1,
    )
    return AgentServer(agents), hooks


if os.environ.get("NOTIFY_DB"):
    server, webhooks = _served()
