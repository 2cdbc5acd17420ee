"""What an invocation answers: its output, the state a client-managed agent sends out, and the interrupts chunk.

:func:`build_output` is the output of an invocation that ran in this process (a detached one
answers with its pending row's id instead); :func:`outgoing` the client-managed state it
carries (transformed, then signed); :func:`interrupts_chunk` the chunk that streams a paused
turn's requests before its turn end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..messages import Message
from ..models import ModelChunk
from ..records._sessions import ErrorInfo, SessionState, Snapshot
from ..stores import SnapshotStore
from .io import AgentOutput, AgentResult

if TYPE_CHECKING:
    from .protocols import RunnableAgent


def build_output(
    agent: RunnableAgent,
    store: SnapshotStore | None,
    state: SessionState,
    result: AgentResult | None,
    tip: Snapshot | None,
    error: ErrorInfo | None,
    last_finish_reason: str | None,
) -> AgentOutput:
    """The invocation's output: the agent's result, else the history's last message and the last finish reason."""
    message = (result.message if result else None) or (state.messages[-1] if state.messages else None)
    finish = "failed" if error else ((result.finish_reason if result else None) or last_finish_reason)
    return AgentOutput(
        session_id=state.session_id,
        snapshot_id=tip.snapshot_id if tip else None,
        state=None if store is not None else outgoing(agent, state),
        message=message,
        artifacts=list(result.artifacts) if result and result.artifacts is not None else list(state.artifacts),
        finish_reason=finish,
        error=error,
    )


def outgoing(agent: RunnableAgent, state: SessionState) -> SessionState:
    """Client-managed state as it leaves the agent: transformed, then signed (``state_signing``)."""
    out = agent.transform_state(state.copy())
    keyring = agent.host.state_signing
    return out if keyring is None else keyring.sign_state(out)


def interrupts_chunk(
    messages: list[Message], store: SnapshotStore | None, model_index: int | float | None
) -> ModelChunk | None:
    """The chunk that streams the paused requests (as committed: with their resume tokens) before the turn end.

    Server-managed: a final ``role: "tool"`` model chunk, as Genkit JS and Go send it.
    Client-managed: the same parts as a ``role: "model"`` chunk with the paused message's
    index, because Genkit's Python client rebuilds the history it sends back from the
    chunks: a model chunk folds into the paused message, which it then replaces with the
    output's copy, so the state it returns stays exact (and signed state still verifies).
    ``None`` when the last message has no interrupts.
    """
    interrupts = messages[-1].interrupts if messages else []
    if not interrupts:
        return None
    if store is not None:
        return ModelChunk(role="tool", content=list(interrupts))
    return ModelChunk(role="model", index=model_index, content=list(interrupts))
