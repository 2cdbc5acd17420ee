"""Drive a delegating agent with the published Genkit Python client (PyPI ``genkit``, ``genkit.exp``).

    .interop/py/bin/python tests/kit/interop/py_delegation.py <agent url>

The agent delegates to a sub-agent whose tool pauses for approval: the client sees the
sub-agent's interrupt as the agent's own, restarts it with resumed metadata, and prints one
line of JSON (what it saw). tests/integration/test_delegation_http.py makes the assertions. Runs in the
interop venv, never in interlock's: it imports nothing from interlock.
"""
# pyright: reportMissingImports=false, reportUnknownMemberType=false, reportUnknownVariableType=false
# pyright: reportUnknownArgumentType=false

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from genkit.exp import remote_agent


async def main(url: str) -> dict[str, Any]:
    chat = remote_agent(url, state_management="server").chat()
    paused = await chat.send("pay bob")
    first = paused.interrupts[0]
    done = await chat.resume(restart=[first.restart(resumed_metadata={"approved": True})])
    return {
        "paused": str(getattr(paused.finish_reason, "value", paused.finish_reason)),
        "interrupts": [{"name": i.name, "ref": i.ref} for i in paused.interrupts],
        "done": {"finishReason": str(getattr(done.finish_reason, "value", done.finish_reason)), "text": done.text},
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1]))))
