"""An agent using the MCP tools of ``tests/kit/mcp_server.py`` (at ``$MCP_URL``), for ``interlock inbox --agents``.

``mcp_client_app:agents`` builds it over the command's store: a ``travel`` agent whose model says
``done`` (a resumer's); the turn that pauses is started by ``agents(store, [PAY, "done"])``, whose
model first asks to ``pay`` 30 (:data:`PAY`). ``$CLAIM_TTL`` (seconds) is its claims' lease.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from interlock import Message, PromptAgent, ToolRequestPart
from interlock.agents import Host
from interlock.http import mcp_tools
from interlock.stores import SessionStore
from interlock.testing import ScriptedModel

PAY = Message(role="model", content=[ToolRequestPart(name="pay", ref="p1", input={"amount": 30})])
"""The model turn that asks the MCP server's ``pay`` tool to pay 30."""


async def agents(store: SessionStore, script: Sequence[Message | str] = ("done",)) -> list[PromptAgent]:
    """The ``travel`` agent over ``store``, with the MCP server's tools; its model plays ``script``."""
    tools = await mcp_tools(os.environ["MCP_URL"])
    host = Host(claim_ttl=float(os.environ.get("CLAIM_TTL", "60")))
    return [PromptAgent("travel", ScriptedModel(script), tools=tools, store=store, host=host)]
