"""An agent server over ``$INTERLOCK_STORE`` with the test context hook, for ``interlock serve ... --inbox``.

With ``INBOX_TOKENS=1`` its agents mint resume tokens and require them.
"""

from __future__ import annotations

import os

from inbox_apps import build_agents, who

from interlock import AgentServer, SQLiteStore

store = SQLiteStore(os.environ["INTERLOCK_STORE"])
server = AgentServer(build_agents(store, tokens=os.environ.get("INBOX_TOKENS") == "1"), context=who)
