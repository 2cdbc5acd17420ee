"""interlock: LLM agents whose tools pause a turn for a person, persist it, and resume it safely.

The names here are the ones an application uses; everything else is importable from the
module that owns it (:mod:`interlock.errors`, :mod:`interlock.parts`, :mod:`interlock.http`,
:mod:`interlock.stores`, :mod:`interlock.models`, ...).
"""

import importlib.metadata as _metadata

from ._engine.io import AgentError, AgentInput, AgentOutput, AgentResult, StreamChunk, TurnContext
from .agents._agent import Agent, CustomAgent, PromptAgent
from .agents._delegation import delegate
from .errors import ClaimConflictError, InterlockError
from .http._client import RemoteAgent
from .http._server import AgentServer
from .inbox._inbox import Inbox, PendingInterrupt
from .interrupts._plan import Resume
from .messages import Message
from .models import Model, resolve_model
from .parts import DataPart, MediaPart, Part, TextPart, ToolRequestPart, ToolResponsePart
from .records._sessions import Session, Snapshot
from .stores import SessionStore
from .stores._urls import open_store
from .stores.memory import InMemoryStore
from .stores.sqlite import SQLiteStore
from .tools._middleware import approve, deny, tool_approval
from .tools._tool import InterruptedCall, Tool, ToolContext, interrupt_tool, tool

try:
    __version__ = _metadata.version("interlock")
    """The installed distribution's version (from its metadata)."""
except _metadata.PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "Agent",
    "AgentError",
    "AgentInput",
    "AgentOutput",
    "AgentResult",
    "AgentServer",
    "ClaimConflictError",
    "CustomAgent",
    "DataPart",
    "InMemoryStore",
    "Inbox",
    "InterlockError",
    "InterruptedCall",
    "MediaPart",
    "Message",
    "Model",
    "Part",
    "PendingInterrupt",
    "PromptAgent",
    "RemoteAgent",
    "Resume",
    "SQLiteStore",
    "Session",
    "SessionStore",
    "Snapshot",
    "StreamChunk",
    "TextPart",
    "Tool",
    "ToolContext",
    "ToolRequestPart",
    "ToolResponsePart",
    "TurnContext",
    "approve",
    "delegate",
    "deny",
    "interrupt_tool",
    "open_store",
    "resolve_model",
    "tool",
    "tool_approval",
]
