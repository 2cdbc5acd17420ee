"""What a caller holds: agents, the host, the agent interface, chat and delegation.

The names below are loaded on first use, so importing one submodule does not import the others.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._agent import Agent as Agent
    from ._agent import AgentConnection as AgentConnection
    from ._agent import CustomAgent as CustomAgent
    from ._agent import CustomAgentFn as CustomAgentFn
    from ._agent import PromptAgent as PromptAgent
    from ._chat import Chat as Chat
    from ._chat import ChatTurn as ChatTurn
    from ._chat import Connects as Connects
    from ._delegation import DelegatedArtifact as DelegatedArtifact
    from ._delegation import Delegation as Delegation
    from ._delegation import DelegationTask as DelegationTask
    from ._delegation import SubAgent as SubAgent
    from ._delegation import SubAgentTurn as SubAgentTurn
    from ._delegation import delegate as delegate
    from ._delegation import tool_for as tool_for
    from ._host import ChunkTransform as ChunkTransform
    from ._host import Host as Host
    from ._host import StateTransform as StateTransform
    from ._interface import AgentAPI as AgentAPI

_WHERE = {
    "Agent": "._agent",
    "AgentAPI": "._interface",
    "AgentConnection": "._agent",
    "Chat": "._chat",
    "ChatTurn": "._chat",
    "ChunkTransform": "._host",
    "Connects": "._chat",
    "CustomAgent": "._agent",
    "CustomAgentFn": "._agent",
    "DelegatedArtifact": "._delegation",
    "Delegation": "._delegation",
    "DelegationTask": "._delegation",
    "Host": "._host",
    "PromptAgent": "._agent",
    "StateTransform": "._host",
    "SubAgent": "._delegation",
    "SubAgentTurn": "._delegation",
    "delegate": "._delegation",
    "tool_for": "._delegation",
}

__all__ = [
    "Agent",
    "AgentAPI",
    "AgentConnection",
    "Chat",
    "ChatTurn",
    "ChunkTransform",
    "Connects",
    "CustomAgent",
    "CustomAgentFn",
    "DelegatedArtifact",
    "Delegation",
    "DelegationTask",
    "Host",
    "PromptAgent",
    "StateTransform",
    "SubAgent",
    "SubAgentTurn",
    "delegate",
    "tool_for",
]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value
