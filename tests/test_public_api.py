"""The front door: one sorted ``__all__``, every name importable, nothing else public."""

from __future__ import annotations

import interlock

EXPECTED = [
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


def test_all_is_sorted_and_pinned() -> None:
    assert interlock.__all__ == sorted(interlock.__all__)
    assert interlock.__all__ == sorted(EXPECTED)


def test_every_name_is_importable_and_nothing_else_is_public() -> None:
    for name in interlock.__all__:
        assert getattr(interlock, name) is not None
    public = {n for n in vars(interlock) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(interlock, n)).__name__ == "module"}
    assert public - modules == set(interlock.__all__)
