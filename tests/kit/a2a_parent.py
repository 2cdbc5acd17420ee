"""An interlock agent delegating to a remote A2A agent (at ``$A2A_REMOTE_URL``), for ``interlock inbox --agents``.

``a2a_parent:agents`` builds ``travel`` over the command's store: its model delegates once
(:data:`DELEGATE`) when the script says so, then says ``done``; the sub-agent is
``A2AAgent($A2A_REMOTE_URL, name=$A2A_REMOTE_NAME)`` (default ``bookings``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from interlock import Message, PromptAgent, ToolRequestPart
from interlock.agents import delegate
from interlock.http import A2AAgent
from interlock.stores import SessionStore
from interlock.testing import ScriptedModel


def delegating(name: str, task: str) -> Message:
    """The model turn that hands ``task`` to the sub-agent ``name``."""
    return Message(role="model", content=[ToolRequestPart(name=f"delegate_to_{name}", ref="d1", input={"task": task})])


def remote() -> A2AAgent:
    return A2AAgent(os.environ["A2A_REMOTE_URL"], name=os.environ.get("A2A_REMOTE_NAME", "bookings"), timeout=60)


def agents(store: SessionStore, script: Sequence[Message | str] = ("done",)) -> list[PromptAgent]:
    """The ``travel`` agent over ``store``; its model plays ``script``."""
    return [PromptAgent("travel", ScriptedModel(script), tools=[*delegate([remote()])], store=store)]
