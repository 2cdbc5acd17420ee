"""What one AG-UI run asks of the protocol seam: a turn on the thread's new message, or the resume of its pause.

``threadId`` is the session of a server-managed agent. A run without ``resume`` sends the
last of ``messages`` (a user message) as the turn's input; the rest of the history lives on
the server, so it is not read. A run with ``resume`` answers the pause its entries name:
``resolved`` becomes the answer the interrupt's :func:`~interlock.http._service.acceptance`
says (its payload as the answer's value), ``cancelled`` a :class:`~interlock.inbox.Reject`.
The resume goes to :meth:`~interlock.http._service.AgentService.resume`, which refuses,
before anything runs or is claimed, an uncovered interrupt, an unknown id, an answered
snapshot (a replay, or the loser of a race) and an answer past a deadline; this module
checks nothing of that itself. A client-managed agent's session travels in ``state`` (the
session JSON the last run's ``STATE_SNAPSHOT`` gave, signed when the agent signs state), or in
``forwardedProps.interlockState``; its resume goes to
:meth:`~interlock.http._service.AgentService.resume_state` with that session.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ag_ui.core import ResumeEntry, RunAgentInput, TextPart, UserMessage
from pydantic import ValidationError

from ... import metadata as md
from ..._engine.io import AgentInit, AgentInput
from ..._json_object import is_object
from ..._wire import state_from_json
from ...errors import InterlockError, InvalidArgumentError
from ...inbox._answers import Answer, Reject
from ...inbox._items import PendingInterrupt
from ...messages import Message
from ...parts import TextPart as Text
from ...records._sessions import SessionState
from .._service import AgentService, Caller, RunningTurn, acceptance
from .events import call_id

LOOKBACK = 50
"""How many turns back a resume's interrupt ids are looked for (a replay names an answered, older pause)."""
FORWARDED_STATE = "interlockState"
"""The ``forwardedProps`` key that may carry a client-managed agent's session instead of ``state``."""


def parse_input(body: object) -> RunAgentInput:
    """The request body as ``RunAgentInput``; INVALID_ARGUMENT naming the first field that does not fit."""
    try:
        return RunAgentInput.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the body"
        raise InvalidArgumentError(f"not an AG-UI RunAgentInput: {where}: {first['msg']}") from None
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidArgumentError(f"not an AG-UI RunAgentInput: {exc}") from None


async def begin(service: AgentService, agent: str, run: RunAgentInput, caller: Caller) -> RunningTurn:
    """Start the turn ``run`` asks for (see the module's docs)."""
    client = service.describe(agent).state_management == "client"
    if run.resume:
        return await (_resume_state if client else _resume)(service, agent, run, caller)
    message = new_message(run)
    init = AgentInit(state=client_state(run)) if client else AgentInit(session_id=run.thread_id)
    return await service.start(agent, AgentInput(message=message), init, caller=caller)


def new_message(run: RunAgentInput) -> Message:
    """The run's new user message: the last of ``messages``."""
    last = run.messages[-1] if run.messages else None
    if not isinstance(last, UserMessage):
        raise InvalidArgumentError(
            "a run without 'resume' needs the new user message last in 'messages' "
            f"(found {'no messages' if last is None else repr(last.role)})"
        )
    if isinstance(last.content, str):
        return Message.user(last.content)
    texts: list[Text] = []
    for part in last.content:
        if not isinstance(part, TextPart):
            raise InvalidArgumentError(f"this agent takes text parts only, not a {part.type!r} part")
        texts.append(Text(text=part.text))
    return Message(role="user", content=list[Any](texts))


def client_state(run: RunAgentInput) -> SessionState | None:
    """A client-managed session as the run carries it (``state``, else ``forwardedProps.interlockState``)."""
    props: Any = run.forwarded_props
    carried: Any = props.get(FORWARDED_STATE) if is_object(props) else None
    given: Any = run.state if carried is None else carried
    if given is None or given == {}:
        return None
    try:
        return state_from_json(given)
    except InterlockError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise InvalidArgumentError(f"'state' is not an interlock session: {exc}") from None


def _ids(entries: list[ResumeEntry]) -> set[str]:
    ids = [e.interrupt_id for e in entries]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise InvalidArgumentError(f"interrupt {twice[0]!r} is answered twice in one resume; answer each once")
    return set(ids)


async def _resume(service: AgentService, agent: str, run: RunAgentInput, caller: Caller) -> RunningTurn:
    entries = run.resume or []
    snapshot_id = await paused_at(service, agent, run.thread_id, _ids(entries), caller)
    items = await service.pending(agent, snapshot_id=snapshot_id, caller=caller)
    answers, tokens = _answers(service, agent, entries, items)
    return await service.resume(agent, snapshot_id, answers, caller=caller, tokens=tokens or None)


async def _resume_state(service: AgentService, agent: str, run: RunAgentInput, caller: Caller) -> RunningTurn:
    entries = run.resume or []
    _ids(entries)
    state = client_state(run)
    if state is None:
        raise InvalidArgumentError(
            f"agent {agent!r} keeps its session on the client: send the session the paused run's STATE_SNAPSHOT "
            "gave in 'state' (or forwardedProps.interlockState) with the resume"
        )
    answers, _ = _answers(service, agent, entries, service.pending_in(agent, state))
    return await service.resume_state(agent, state, answers, caller=caller)


def _answers(
    service: AgentService, agent: str, entries: list[ResumeEntry], pending: list[PendingInterrupt]
) -> tuple[dict[str, Answer], dict[str, str]]:
    """The answer of each entry by interrupt id, and the resume tokens entries carry (``metadata.resumeToken``)."""
    items = {call_id(i.ref, i.tool): i for i in pending}
    answers: dict[str, Answer] = {}
    tokens: dict[str, str] = {}
    for entry in entries:
        item = items.get(entry.interrupt_id)
        answers[entry.interrupt_id] = _answer(service, agent, entry, item)
        token = _token(entry.metadata)
        if token is not None and item is not None and item.ref:
            tokens[item.ref] = token
    return answers, tokens


def _answer(service: AgentService, agent: str, entry: ResumeEntry, item: PendingInterrupt | None) -> Answer:
    if entry.status == "cancelled" or item is None:  # an unknown id is refused by the resume, never run
        return Reject()
    return acceptance(service.options(agent, item)).answer(entry.payload)


def _token(metadata: Mapping[str, Any] | None) -> str | None:
    token = (metadata or {}).get(md.RESUME_TOKEN)
    return token if isinstance(token, str) else None


async def paused_at(service: AgentService, agent: str, thread: str, ids: set[str], caller: Caller) -> str:
    """The snapshot a resume answers: the latest of the thread that paused on one of ``ids``, else its latest."""
    latest = snap = await service.read(agent, session_id=thread, caller=caller)
    for _ in range(LOOKBACK):
        if ids & {call_id(p.ref, p.name) for p in snap.interrupts}:
            return snap.snapshot_id
        if snap.parent_id is None:
            break
        snap = await service.read(agent, snapshot_id=snap.parent_id, caller=caller)
    return latest.snapshot_id
