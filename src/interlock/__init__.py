"""interlock: LLM agents whose tools pause a turn for a person, persist it, and resume it safely."""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _distribution_version

from ._runtime import SessionRunner
from .agents import Agent, AgentConnection, CustomAgent, PromptAgent
from .client import RemoteAgent, RemoteConnection
from .errors import (
    AbortedError,
    ClaimConflictError,
    FailedPreconditionError,
    InterlockError,
    Interrupt,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    ResumeError,
    SnapshotNotFoundError,
    ToolError,
    ToolInputError,
    ToolOutputError,
    UnauthenticatedError,
    UsageError,
)
from .generate import GenerateResult, check_resume, generate
from .inbox import Inbox, PendingInterrupt
from .interrupts import Resume, interrupt_as, is_interrupt, pending_interrupts, validate_resume
from .messages import Message
from .middleware import approve, deny, is_hold, tool_approval
from .models import Model, ModelChunk, ModelRequest, ModelResponse, register_provider, resolve_model
from .parts import (
    CustomPart,
    DataPart,
    MediaPart,
    Part,
    ReasoningPart,
    ResourcePart,
    TextPart,
    ToolRequestPart,
    ToolResponsePart,
)
from .server import AgentServer, ContextProvider, RequestInfo, create_app
from .sessions import Artifact, CustomPatch, ErrorInfo, Session, SessionState, Snapshot
from .stores import InMemoryStore, SessionStore
from .stores.sqlite import SQLiteStore
from .tools import InterruptedCall, Tool, ToolContext, interrupt_tool, tool
from .turns import AgentInit, AgentInput, AgentOutput, AgentResult, StreamChunk, TurnContext, TurnEnd, TurnResult

try:
    __version__ = _distribution_version("interlock")
    """The installed distribution's version (from its metadata)."""
except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "AbortedError",
    "Agent",
    "AgentConnection",
    "AgentInit",
    "AgentInput",
    "AgentOutput",
    "AgentResult",
    "AgentServer",
    "Artifact",
    "ClaimConflictError",
    "ContextProvider",
    "CustomAgent",
    "CustomPart",
    "CustomPatch",
    "DataPart",
    "ErrorInfo",
    "FailedPreconditionError",
    "GenerateResult",
    "InMemoryStore",
    "Inbox",
    "InterlockError",
    "Interrupt",
    "InterruptedCall",
    "InvalidArgumentError",
    "MediaPart",
    "Message",
    "Model",
    "ModelChunk",
    "ModelRequest",
    "ModelResponse",
    "NotFoundError",
    "Part",
    "PendingInterrupt",
    "PermissionDeniedError",
    "PromptAgent",
    "ReasoningPart",
    "RemoteAgent",
    "RemoteConnection",
    "RequestInfo",
    "ResourcePart",
    "Resume",
    "ResumeError",
    "SQLiteStore",
    "Session",
    "SessionRunner",
    "SessionState",
    "SessionStore",
    "Snapshot",
    "SnapshotNotFoundError",
    "StreamChunk",
    "TextPart",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolInputError",
    "ToolOutputError",
    "ToolRequestPart",
    "ToolResponsePart",
    "TurnContext",
    "TurnEnd",
    "TurnResult",
    "UnauthenticatedError",
    "UsageError",
    "approve",
    "check_resume",
    "create_app",
    "deny",
    "generate",
    "interrupt_as",
    "interrupt_tool",
    "is_hold",
    "is_interrupt",
    "pending_interrupts",
    "register_provider",
    "resolve_model",
    "tool",
    "tool_approval",
    "validate_resume",
]
