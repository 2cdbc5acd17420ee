"""The inbox test agents over ``$INTERLOCK_STORE``, for ``interlock serve agui_app:server --ag-ui``.

``X-User`` names the caller (:func:`inbox_apps.who`); with ``INBOX_RUNS_LOG`` set, every transfer
that runs appends one line to that file (the tests count them).
"""

from __future__ import annotations

import os

from inbox_apps import build_agents, who

from interlock import AgentServer, SQLiteStore

store = SQLiteStore(os.environ["INTERLOCK_STORE"])
server = AgentServer(build_agents(store), context=who)
