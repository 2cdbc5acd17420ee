"""The bank agent over ``$INTERLOCK_STORE`` with ``claim_ttl=1``, for ``interlock serve mcp_served:server --mcp``.

With ``MCP_HANG_PARENT`` and ``MCP_HANG_MARKER`` set, the resume of that snapshot hangs inside
its commit's transaction (after the claim, before the commit; it writes the marker first), so a
fault test can SIGKILL the server there. Transfers log to ``$INBOX_RUNS_LOG``.
"""

from __future__ import annotations

import os
import pathlib

from fault_worker import _hanging_commit_store  # pyright: ignore[reportPrivateUsage]
from inbox_apps import plan, transfer, who

from interlock import AgentServer, PromptAgent, SQLiteStore
from interlock.agents._host import Host
from interlock.testing import ScriptedModel

_db = os.environ["INTERLOCK_STORE"]
_parent = os.environ.get("MCP_HANG_PARENT")
store = (
    _hanging_commit_store(_db, _parent, pathlib.Path(os.environ["MCP_HANG_MARKER"])) if _parent else SQLiteStore(_db)
)
bank = PromptAgent("bank", ScriptedModel([plan] * 1000), tools=[transfer], store=store, host=Host(claim_ttl=1.0))
server = AgentServer([bank], context=who)
