"""What goes into an agent and what comes out: inputs, init, outputs, stream chunks, and the connection.

:class:`BaseConnection` is what a local and a remote connection share. A connection is fed
from one side: its inputs go to an invocation in this process
(:class:`~interlock.agents.AgentConnection`) or out as HTTP requests
(:class:`~interlock.http.RemoteConnection`); either way its chunks arrive on one queue that
:data:`END` closes, and its output is one future.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Generic, Literal, Protocol, Self, TypeAlias, TypeVar, cast

from .._json import check_json, check_message, type_name
from .._json_object import new_dict, new_list
from ..errors import InterlockError, InvalidArgumentError, UsageError, error_class
from ..interrupts._plan import Resume, ResumePlan, check_resume_shape
from ..messages import Message
from ..models import ModelChunk
from ..parts import ToolRequestPart
from ..records._evolve import fast_init
from ..records._sessions import Artifact, CustomPatch, ErrorInfo, SessionState
from .effects import Effects

T = TypeVar("T")


class AgentFinishReason(StrEnum):
    """Why an invocation (or a turn) ended: the model's reasons plus ``aborted``, ``detached`` and ``failed``.

    Members equal their wire strings (``AgentFinishReason.INTERRUPTED == "interrupted"``); outputs
    carry the plain string, and a value this version does not know is kept as given.
    """

    STOP = "stop"
    LENGTH = "length"
    BLOCKED = "blocked"
    INTERRUPTED = "interrupted"
    OTHER = "other"
    UNKNOWN = "unknown"
    ABORTED = "aborted"
    DETACHED = "detached"
    FAILED = "failed"


@fast_init
@dataclass(frozen=True, kw_only=True, slots=True)
class AgentInput:
    """One input of an invocation: a user message, a resume, or both; ``detach`` sends the turn to the background."""

    message: Message | None = None
    resume: Resume | None = None
    detach: bool = False


@fast_init
@dataclass(frozen=True, kw_only=True, slots=True)
class AgentInit:
    """Where an invocation's session comes from.

    Server-managed agents take ``snapshot_id`` and/or ``session_id`` (both: the snapshot
    must belong to the session); client-managed agents take ``state``.
    """

    session_id: str | None = None
    snapshot_id: str | None = None
    state: SessionState | None = None


@fast_init
@dataclass(frozen=True, kw_only=True, slots=True)
class TurnEnd:
    """Ends each turn's stream: the snapshot written (server-managed) and the turn's finish reason."""

    snapshot_id: str | None = None
    finish_reason: str | None = None


StreamChunk: TypeAlias = ModelChunk | Artifact | CustomPatch | TurnEnd
"""What an agent streams: model chunks, artifacts, custom-state patches, and one turn end per turn."""


@fast_init
@dataclass(frozen=True, kw_only=True, slots=True)
class AgentOutput:
    """The result of an invocation.

    A failed invocation has ``finish_reason`` ``failed``, ``error`` saying why, and
    ``snapshot_id`` / ``state`` pointing at the last good state. ``run()`` and the chat
    methods raise it as an :class:`AgentError` (``raise_on_error=False`` returns it);
    a connection's ``output()`` returns it.
    """

    session_id: str | None = None
    snapshot_id: str | None = None
    state: SessionState | None = None
    message: Message | None = None
    artifacts: list[Artifact] = field(default_factory=new_list)
    finish_reason: str | None = None
    error: ErrorInfo | None = None

    @property
    def text(self) -> str:
        """The text of the last message."""
        return self.message.text if self.message else ""

    @property
    def interrupts(self) -> list[ToolRequestPart]:
        """The paused tool requests when the turn was interrupted."""
        if self.finish_reason != "interrupted" or self.message is None:
            return []
        return self.message.interrupts

    def raise_for_error(self) -> AgentOutput:
        """Raise the :class:`AgentError` of a failed invocation; return ``self`` otherwise."""
        if self.error is not None:
            raise AgentError.of(self)
        return self


class AgentError(InterlockError):
    """A failed invocation, raised by ``run()`` and the chat methods, with its output attached.

    The raised error is also an instance of its status's error class, so ``except
    NotFoundError`` catches a turn that failed ``NOT_FOUND`` and ``except AgentError``
    catches every failed invocation.

    Attributes:
        output: the whole output (``finish_reason`` ``failed``, ``error``, the last message).
    """

    def __init__(self, output: AgentOutput) -> None:
        error = output.error or ErrorInfo(status="UNKNOWN", message="the invocation failed")
        super().__init__(error.message, details=error.details, status=error.status)
        self.output = output

    @classmethod
    def of(cls, output: AgentOutput) -> AgentError:
        """The error of a failed ``output``, as the subclass of :class:`AgentError` for its status."""
        return _with_status(error_class(output.error.status if output.error else None))(output)

    @property
    def snapshot_id(self) -> str | None:
        """The last good snapshot (server-managed): where to continue from."""
        return self.output.snapshot_id

    @property
    def session_id(self) -> str | None:
        return self.output.session_id

    @property
    def state(self) -> SessionState | None:
        """The last good state (client-managed): what to send back next."""
        return self.output.state


@functools.cache
def _with_status(base: type[InterlockError]) -> type[AgentError]:
    """``AgentError`` combined with a status's error class, e.g. ``AgentNotFoundError(AgentError, NotFoundError)``."""
    namespace = {"__module__": __name__, "__doc__": f"A failed invocation whose status is {base.__name__}'s."}
    return cast(type[AgentError], type(f"Agent{base.__name__}", (AgentError, base), namespace))


@fast_init
@dataclass(frozen=True, kw_only=True, slots=True)
class TurnContext:
    """What a custom agent's turn handler knows about the turn."""

    snapshot_id: str | None
    """The id reserved for this turn's snapshot (server-managed agents)."""
    parent_snapshot_id: str | None
    turn_index: int
    context: dict[str, Any] = field(default_factory=new_dict)
    plan: ResumePlan | None = None
    """The turn's resume, validated (``None`` when the input carries no resume)."""
    reclaimed_from: str | None = None
    """The turn whose lapsed claim on the resumed snapshot this turn took over (its tools may have run)."""
    effects: Effects | None = None
    """The turn's effect journal (server-managed agents): run tool bodies through it so none repeats silently."""


@fast_init
@dataclass(frozen=True, kw_only=True, slots=True)
class TurnResult:
    """A turn handler's optional result."""

    finish_reason: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentResult:
    """A custom agent's optional result."""

    message: Message | None = None
    artifacts: list[Artifact] | None = None
    finish_reason: str | None = None


InputLike = str | Message | AgentInput | None
OnChunk = Callable[[StreamChunk], Awaitable[None] | None]
"""Receives each stream chunk of a turn (sync or async)."""


def as_input(value: InputLike | object, *, resume: Resume | None = None, detach: bool = False) -> AgentInput:
    """Normalise what callers pass to ``send``/``run`` into a checked :class:`AgentInput`.

    This is the input edge: a value of the wrong type (``run(12345)``, a dict instead of a
    :class:`Resume`, a part of the wrong kind) or one holding something that is not JSON
    raises :class:`~interlock.errors.InvalidArgumentError` here, before anything runs.
    """
    built = False  # a user message built here from a string: only its text is the caller's
    if isinstance(value, AgentInput):
        if resume is not None or detach:
            value = AgentInput(message=value.message, resume=resume or value.resume, detach=detach or value.detach)
    elif value is None or isinstance(value, (str, Message)):
        if isinstance(value, str):
            check_json(value, "message.content[0].text")
            built = True
        message = Message.user(value) if isinstance(value, str) else value
        value = AgentInput(message=message, resume=resume, detach=detach)
    else:
        raise InvalidArgumentError(f"an agent input is a string, a Message or an AgentInput, not {type_name(value)}")
    if value.message is not None and not built:
        check_message(value.message, "message")
    if value.resume is not None:
        check_resume_shape(value.resume)
    flag: Any = value.detach
    if not isinstance(flag, bool):
        raise InvalidArgumentError("'detach' must be a boolean")
    return value


class Connection(Protocol):
    """A live invocation, local or remote: send inputs, close, iterate stream chunks, take the output."""

    async def send(self, value: InputLike = None, *, resume: Resume | None = None, detach: bool = False) -> None: ...
    async def close(self) -> None: ...
    def __aiter__(self) -> AsyncIterator[StreamChunk]: ...
    async def output(self) -> AgentOutput: ...


async def send_checked(conn: Connection, input: AgentInput) -> None:
    """Send ``conn`` an input :func:`as_input` returned; a :class:`BaseConnection` does not check it again."""
    if isinstance(conn, BaseConnection):
        conn.put_checked(input)
    else:
        await conn.send(input)


class _End(enum.Enum):
    END = "end"


END = _End.END
"""Marks the end of an input or chunk queue."""
Ended: TypeAlias = Literal[_End.END]
"""The type of :data:`END` (``queue: asyncio.Queue[StreamChunk | Ended]``)."""


class Waiting(Generic[T]):
    """An unbounded queue of an invocation's turns or stream chunks: :class:`asyncio.Queue`'s use here, with less.

    No size limit and no ``join`` bookkeeping, so no event: a deque, and the futures of the
    readers while they wait (usually none, or one). An item wakes every waiting reader; each
    takes one if one is left, or waits again.
    """

    __slots__ = ("_items", "_waiters")

    def __init__(self) -> None:
        self._items: collections.deque[T] = collections.deque()
        self._waiters: list[asyncio.Future[None]] | None = None

    def put_nowait(self, item: T) -> None:
        self._items.append(item)
        waiters = self._waiters
        if waiters:
            self._waiters = None
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    def empty(self) -> bool:
        return not self._items

    async def get(self) -> T:
        """The next item, once there is one."""
        while not self._items:
            waiter = asyncio.get_running_loop().create_future()
            if self._waiters is None:
                self._waiters = [waiter]
            else:
                self._waiters.append(waiter)
            try:
                await waiter
            finally:
                self._forget(waiter)
        return self._items.popleft()

    def _forget(self, waiter: asyncio.Future[None]) -> None:
        """A reader stops waiting (woken, or cancelled while it waited)."""
        waiters = self._waiters
        if waiters is not None and waiter in waiters:
            waiters.remove(waiter)


async def settled(future: asyncio.Future[Any]) -> None:
    """Wait until ``future`` is done; a cancelled wait leaves ``future`` be (:func:`asyncio.shield`'s use, with less).

    One callback on ``future`` wakes the waiter: no outer future, and none of its callbacks.
    """
    waiter = future.get_loop().create_future()

    def wake(_: object) -> None:
        if not waiter.done():
            waiter.set_result(None)

    future.add_done_callback(wake)
    try:
        await waiter
    finally:
        future.remove_done_callback(wake)


class BaseConnection:
    """A live invocation: send inputs, iterate stream chunks, then take the output.

    Subclasses say where an input goes (:meth:`_put`), what closing the input side does
    (:meth:`_end_inputs`) and how to stop (``cancel``); they put the chunks on ``_chunks``
    (then :data:`END`) and resolve ``_output``.
    """

    def __init__(self, chunks: Waiting[StreamChunk | Ended], output: asyncio.Future[AgentOutput]) -> None:
        self._chunks = chunks
        self._output = output
        self._closed = False

    async def send(self, value: InputLike = None, *, resume: Resume | None = None, detach: bool = False) -> None:
        """Queue one input: a message (text or :class:`~interlock.Message`), a resume, or both."""
        self.put_checked(as_input(value, resume=resume, detach=detach))

    def put_checked(self, input: AgentInput) -> None:
        """Queue an input :func:`as_input` returned (it is not checked again: input is checked once, at the edge)."""
        if self._closed:
            raise UsageError("this connection is closed; open a new one with agent.connect()")
        self._put(input)

    async def resume(self, resume: Resume) -> None:
        """Queue a resume: answers to the paused turn's interrupts."""
        await self.send(None, resume=resume)

    async def detach(self) -> None:
        """Send the rest of the invocation to the background; the output becomes a pending snapshot."""
        await self.send(AgentInput(detach=True))

    async def close(self) -> None:
        """End the input side; the queued inputs still run."""
        if not self._closed:
            self._closed = True
            self._end_inputs()

    def __aiter__(self) -> AsyncIterator[StreamChunk]:
        return self._stream()

    async def _stream(self) -> AsyncIterator[StreamChunk]:
        while True:
            chunk = await self._chunks.get()
            if chunk is END:
                self._chunks.put_nowait(END)  # for the next iterator
                return
            yield chunk

    async def output(self) -> AgentOutput:
        """The invocation's output (closes the input side first); raises the typed error of a refused one."""
        await self.close()
        out = self._output
        if not out.done():
            await self._until_output()
        return out.result()

    def _until_output(self) -> Awaitable[None]:
        """What :meth:`output` awaits until the output is done; cancelling it must leave the output be."""
        return settled(self._output)

    def cancel(self) -> None:
        """Stop the invocation now."""
        raise NotImplementedError

    def _put(self, input: AgentInput) -> None:
        raise NotImplementedError

    def _end_inputs(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
