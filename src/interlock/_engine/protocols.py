"""What the engine needs of an agent and of a custom agent's turn function, and the runner that function drives.

A leaf: it imports nothing of interlock at run time, so the engine's modules (``invocation``,
``load``, ``commit``, ``output``, ...) can type against an agent without
importing ``agents``, and ``agents`` can import the engine.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

if TYPE_CHECKING:
    import asyncio

    from ..agents._host import Host
    from ..interrupts._plan import Resume, ResumePlan
    from ..interrupts._tokens import TokenDecision
    from ..messages import Message
    from ..parts import ToolRequestPart
    from ..records._sessions import Session, SessionState
    from ..stores import SessionStore
    from .io import AgentInput, AgentResult, StreamChunk, TurnContext, TurnResult


class RunnableAgent(Protocol):
    """What the engine needs of an agent (:class:`~interlock.agents.Agent` is one).

    Its deployment settings are one value, ``host`` (:class:`~interlock.agents.Host`); the
    store, which makes the agent server-managed, is ``store``.
    """

    name: str
    store: SessionStore | None

    @property
    def host(self) -> Host: ...

    async def invoke(self, runner: SessionRunner) -> AgentResult | None: ...
    def check_resume(self, resume: Resume, history: list[Message]) -> ResumePlan: ...
    def transform_state(self, state: SessionState) -> SessionState: ...
    def custom_transform(self, custom: object) -> Any: ...
    def transform_chunk(self, chunk: StreamChunk) -> StreamChunk | None: ...
    def token_decisions(self, part: ToolRequestPart) -> tuple[TokenDecision, ...]: ...


TurnHandler: TypeAlias = "Callable[[AgentInput, TurnContext], Awaitable[TurnResult | None]]"
"""A custom agent's per-turn function."""


class RunnerHost(Protocol):
    """What a :class:`SessionRunner` drives (the engine's invocation)."""

    @property
    def session(self) -> Session: ...

    @property
    def context(self) -> dict[str, Any]: ...

    @property
    def abort_event(self) -> asyncio.Event: ...

    @property
    def last_finish_reason(self) -> str | None: ...

    def emit(self, chunk: StreamChunk) -> None: ...

    async def run_turns(self, handler: TurnHandler) -> None: ...


class SessionRunner:
    """What a custom agent function drives: the session, the turn loop, and the stream."""

    def __init__(self, invocation: RunnerHost) -> None:
        self._inv = invocation

    @property
    def session(self) -> Session:
        """The live session (messages, custom state, artifacts)."""
        return self._inv.session

    @property
    def context(self) -> dict[str, Any]:
        """The caller's context (identity, tenant, ...)."""
        return self._inv.context

    @property
    def aborted(self) -> asyncio.Event:
        """Set when the caller aborts a detached invocation."""
        return self._inv.abort_event

    @property
    def last_finish_reason(self) -> str | None:
        """The finish reason of the last completed turn."""
        return self._inv.last_finish_reason

    def send_chunk(self, chunk: StreamChunk) -> None:
        """Stream a chunk to the caller (dropped after a detach)."""
        self._inv.emit(chunk)

    async def run(self, handler: TurnHandler) -> None:
        """Run ``handler`` once per input, adding each input's message to the history first."""
        await self._inv.run_turns(handler)
