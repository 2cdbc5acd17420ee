"""A conversation handle over any agent, local or remote: it tracks the snapshot or the state for you.

::

    chat = agent.chat()                          # or: await agent.load_chat(snapshot_id=...)
    out = await chat.send("Send Bob 25")
    if chat.interrupts:
        call = transfer_money.interrupted(chat.interrupts[0])
        out = await chat.resume(restart=[call.restart(Confirmation(approved=True))])

    turn = chat.send_stream("and the balance?")  # the streaming variant
    async for chunk in turn:
        ...
    out = await turn.output()

Each turn continues from the previous output: its snapshot id for a server-managed agent,
its state for a client-managed one (or the init the chat was made with, before the first
output). A failed turn raises :class:`~interlock._engine.io.AgentError` (``raise_on_error=False``
returns the output) and leaves the chat at the last good snapshot or state, its interrupts
still pending. The chat works over the connection interface that :class:`~interlock.Agent`
and :class:`~interlock.RemoteAgent` share.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Iterable
from typing import Any, Protocol

from .._engine.io import AgentInput, AgentOutput, Connection, InputLike, OnChunk, StreamChunk, as_input, send_checked
from ..errors import InvalidArgumentError
from ..interrupts._plan import Resume
from ..parts import ToolRequestPart, ToolResponsePart
from ..records._sessions import SessionState, Snapshot
from ..records.snapshots import is_answerable


class Connects(Protocol):
    """What a chat needs of an agent: opening a connection (both agents and remote agents do)."""

    def connect(
        self,
        *,
        snapshot_id: str | None = None,
        session_id: str | None = None,
        state: SessionState | None = None,
        context: dict[str, Any] | None = None,
    ) -> Connection: ...


class Chat:
    """A conversation with an agent; build one with ``agent.chat()`` or ``await agent.load_chat(...)``.

    Attributes:
        agent: the agent (local or remote).
        context: the caller's context, sent with every turn (local agents; a remote server
            derives its own from the request).
        raise_on_error: raise :class:`~interlock._engine.io.AgentError` for a failed turn (the
            default), or return its output.
        last: the last turn's output, ``None`` before the first.
        snapshot: the snapshot :meth:`~interlock.Agent.load_chat` loaded, if any.
    """

    def __init__(
        self,
        agent: Connects,
        *,
        snapshot_id: str | None = None,
        session_id: str | None = None,
        state: SessionState | None = None,
        context: dict[str, Any] | None = None,
        raise_on_error: bool = True,
    ) -> None:
        self.agent = agent
        self.context: dict[str, Any] = dict(context or {})
        self.raise_on_error = raise_on_error
        self.last: AgentOutput | None = None
        self.snapshot: Snapshot | None = None
        self._first: dict[str, Any] = {"snapshot_id": snapshot_id, "session_id": session_id, "state": state}
        self._snapshot_id = snapshot_id
        self._session_id = session_id or (state.session_id if state is not None else None)
        self._state = state
        self._interrupts: list[ToolRequestPart] = []

    @classmethod
    def loaded(
        cls, agent: Connects, snapshot: Snapshot, *, context: dict[str, Any] | None = None, raise_on_error: bool = True
    ) -> Chat:
        """A chat continuing ``snapshot``; its interrupts are those the snapshot waits on.

        A snapshot that is not ``completed`` (a failed or running leaf) is continued by its
        session id, so the agent picks the session's last good snapshot.
        """
        resumable = snapshot.status == "completed"
        chat = cls(
            agent,
            snapshot_id=snapshot.snapshot_id if resumable else None,
            session_id=snapshot.session_id,
            context=context,
            raise_on_error=raise_on_error,
        )
        chat.snapshot = snapshot
        chat._interrupts = list(snapshot.interrupts) if is_answerable(snapshot) else []
        return chat

    def __repr__(self) -> str:
        return f"Chat({self.agent!r}, snapshot_id={self._snapshot_id!r}, session_id={self._session_id!r})"

    @property
    def snapshot_id(self) -> str | None:
        """The snapshot the next turn continues from (server-managed agents)."""
        return self._snapshot_id

    @property
    def session_id(self) -> str | None:
        return self._session_id

    @property
    def state(self) -> SessionState | None:
        """The state the next turn sends back (client-managed agents)."""
        return self._state

    @property
    def interrupts(self) -> list[ToolRequestPart]:
        """The paused tool requests waiting for an answer (answer them with :meth:`resume`)."""
        return list(self._interrupts)

    async def send(self, input: InputLike, *, on_chunk: OnChunk | None = None) -> AgentOutput:
        """Send a message (text or :class:`~interlock.Message`); returns the turn's output."""
        return await self.send_stream(input).finish(on_chunk)

    async def resume(
        self,
        *,
        respond: Iterable[ToolResponsePart] = (),
        restart: Iterable[ToolRequestPart] = (),
        metadata: Any = None,
        on_chunk: OnChunk | None = None,
    ) -> AgentOutput:
        """Answer the paused turn: ``respond`` entries supply outputs, ``restart`` entries run tools again."""
        return await self.resume_stream(respond=respond, restart=restart, metadata=metadata).finish(on_chunk)

    def send_stream(self, input: InputLike) -> ChatTurn:
        """:meth:`send`, streamed: iterate the returned turn for chunks, then ``await turn.output()``."""
        if input is None:
            raise InvalidArgumentError("chat.send needs a message; answer interrupts with chat.resume")
        return self._start(as_input(input))

    def resume_stream(
        self, *, respond: Iterable[ToolResponsePart] = (), restart: Iterable[ToolRequestPart] = (), metadata: Any = None
    ) -> ChatTurn:
        """:meth:`resume`, streamed."""
        resume = Resume(respond=list(respond), restart=list(restart), metadata=metadata)
        if not resume:
            raise InvalidArgumentError("chat.resume needs at least one respond or restart entry")
        return self._start(as_input(None, resume=resume))

    def _start(self, input: AgentInput) -> ChatTurn:
        return ChatTurn(self, self.agent.connect(**self._init(), context=self.context), input)

    def _init(self) -> dict[str, Any]:
        """The first turn uses the chat's own init; later ones the last snapshot, else the last state."""
        if self.last is None:
            return dict(self._first)
        if self._snapshot_id is not None:
            return {"snapshot_id": self._snapshot_id}
        if self._state is not None:
            return {"state": self._state}
        return {"session_id": self._session_id}

    def track(self, output: AgentOutput) -> AgentOutput:
        """Take a turn's output: where the next turn continues from, and what waits for an answer.

        Returns it, or raises its :class:`~interlock._engine.io.AgentError` (``raise_on_error``).
        """
        self.last = output
        self._snapshot_id = output.snapshot_id or self._snapshot_id
        self._state = output.state if output.state is not None else self._state
        self._session_id = output.session_id or self._session_id
        if output.error is None:  # a refused resume changes nothing: its interrupts still wait
            self._interrupts = output.interrupts
        return output.raise_for_error() if self.raise_on_error else output


class ChatTurn:
    """One turn of a :class:`Chat`: iterate it for stream chunks, then ``await turn.output()``."""

    def __init__(self, chat: Chat, connection: Connection, input: AgentInput) -> None:
        self._chat = chat
        self._conn = connection
        self._input = input
        self._sent = False
        self._output: AgentOutput | None = None

    async def _send(self) -> None:
        if not self._sent:
            self._sent = True
            await send_checked(self._conn, self._input)
            await self._conn.close()

    def __aiter__(self) -> AsyncIterator[StreamChunk]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[StreamChunk]:
        await self._send()
        async for chunk in self._conn:
            yield chunk

    async def output(self) -> AgentOutput:
        """The turn's output, tracked by the chat (raises for a failed turn unless ``raise_on_error=False``)."""
        if self._output is None:
            await self._send()
            self._output = await self._conn.output()
            return self._chat.track(self._output)
        return self._output.raise_for_error() if self._chat.raise_on_error else self._output

    async def finish(self, on_chunk: OnChunk | None = None) -> AgentOutput:
        """Pass each chunk to ``on_chunk`` (when given), then return :meth:`output`."""
        if on_chunk is not None:
            async for chunk in self:
                result = on_chunk(chunk)
                if inspect.isawaitable(result):
                    await result
        return await self.output()
