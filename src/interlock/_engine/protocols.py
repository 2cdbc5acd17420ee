"""What the engine needs of an agent and of a custom agent's turn function.

A leaf: it imports nothing of interlock at run time, so the engine's modules (``runtime``,
``_session_load``, ``_turn_commit``, ``tokens``, ...) can type against an agent without
importing ``agents``, and ``agents`` can import the engine.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

if TYPE_CHECKING:
    from ..agents._host import Host
    from ..interrupts._plan import Resume, ResumePlan
    from ..interrupts._tokens import TokenDecision
    from ..messages import Message
    from ..parts import ToolRequestPart
    from ..records._sessions import SessionState
    from ..stores import SessionStore
    from .invocation import SessionRunner
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
