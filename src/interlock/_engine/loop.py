"""The tool loop: call the model, run the tools it asks for, pause on interrupts, resume.

Interrupt state lives in part metadata exactly as Genkit stores it, so a paused turn is
just history: the last message is the model message whose tool requests carry
``interrupt`` (paused) or ``pendingOutput`` (finished siblings, parked so they never run
twice). :func:`generate` with ``resume=`` continues such a history.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeAlias

from .. import metadata as md
from .._json import check_reply
from .._json_object import is_object, new_dict, new_list
from ..errors import (
    FailedPreconditionError,
    InterlockError,
    Interrupt,
    MaxTurnsExceededError,
    NotFoundError,
    ToolError,
    ToolInputError,
    UsageError,
)
from ..interrupts._plan import PlannedCall, Resume, ResumePlan, plan_resume
from ..interrupts._policy import check_answers, pause_record, recorded
from ..messages import Message
from ..models import ChunkCallback, Model, ModelChunk, ModelRequest, Usage
from ..parts import Part, ToolRequestPart, ToolResponsePart, with_metadata
from ..records._evolve import evolver, fast_init
from ..records._sessions import Session, utcnow
from ..telemetry import _calls as telemetry
from ..tools._context import ToolContext, ToolMiddleware
from ..tools._expiry import deadline_metadata
from ..tools._tool import Tool
from .effects import Effects
from .surfacing import collapse, expand

ToolErrors: TypeAlias = Literal["raise", "model"]
"""What a tool error does: fail the turn (``"raise"``) or go back to the model as the call's output (``"model"``)."""

REINTERRUPTED = "One or more tools triggered interrupts while resuming generation. The model was not called."


@fast_init
@dataclass(frozen=True, kw_only=True, slots=True)
class GenerateResult:
    """The outcome of one tool-loop turn."""

    messages: list[Message]
    """The whole history after the turn (the input history plus what the turn added)."""
    finish_reason: str
    """The model's finish reason, or ``interrupted`` when a tool paused the turn."""
    finish_message: str | None = None
    usage: Usage | None = None
    model_calls: int = 0

    @property
    def message(self) -> Message:
        """The last message: the model's reply, or the paused model message."""
        return self.messages[-1]

    @property
    def interrupts(self) -> list[ToolRequestPart]:
        """The paused tool requests, when the turn was interrupted."""
        return self.message.interrupts if self.finish_reason == "interrupted" else []


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolErrorPolicy:
    """What a tool error does to a turn: fail it, or go back to the model so it can correct itself.

    A plain :data:`ToolErrors` string ``mode`` stands for ``ToolErrorPolicy(on_error=mode)``.
    """

    on_error: ToolErrors = "raise"
    """``"raise"`` fails the turn when a tool raises (a :class:`ToolError`) or the model names a
    tool that does not exist (NOT_FOUND); ``"model"`` sends the error text back to the model as
    that call's output, ``{"error": message}``. A typed interlock error a tool raises always fails the turn."""
    on_input_error: ToolErrors | None = None
    """The same choice for a model input that fails the tool's schema (INVALID_ARGUMENT); ``None``
    follows ``on_error``."""
    retries: int = 2
    """In ``"model"`` mode, how many errors of one tool (or one unknown name) a turn sends back to
    the model; the next one fails the turn."""

    @property
    def input_mode(self) -> ToolErrors:
        return self.on_error if self.on_input_error is None else self.on_input_error


class ToolLoop:
    """One agent's tool loop, built once: the model, its tools and the rules of a turn.

    :meth:`run` is one turn, given only what varies per turn (the history, the resume plan,
    the session, the effect journal, where chunks go). :func:`generate` builds one and runs it;
    :class:`~interlock.PromptAgent` builds one, at ``agent.loop``.

    Args:
        model: the model to call.
        tools: the tools the model may call.
        config: model configuration (temperature, ...).
        max_turns: the most tool-calling rounds of a turn before :class:`MaxTurnsExceededError`.
        middleware: wraps every tool execution (restarts too).
        allow_replaced_input: accept restarts whose input differs from the original
            (recorded as ``replacedInput``); never enable it for untrusted callers.
        tool_errors: what tool errors do (:class:`ToolErrorPolicy`, or its ``on_error`` mode).
        tool_choice: passed to the model request.
    """

    __slots__ = (
        "allow_replaced_input",
        "by_name",
        "config",
        "definitions",
        "errors",
        "max_turns",
        "middleware",
        "model",
        "tool_choice",
        "tools",
    )

    def __init__(
        self,
        model: Model,
        *,
        tools: Sequence[Tool[Any, Any, Any]] = (),
        config: dict[str, Any] | None = None,
        max_turns: int = 5,
        middleware: Sequence[ToolMiddleware] = (),
        allow_replaced_input: bool = False,
        tool_errors: ToolErrors | ToolErrorPolicy = "raise",
        tool_choice: Any = None,
    ) -> None:
        self.model = model
        self.tools = tuple(tools)
        self.by_name: Mapping[str, Tool[Any, Any, Any]] = {t.name: t for t in self.tools}
        self.definitions = [t.definition for t in self.tools]
        self.config = config
        self.max_turns = max_turns
        self.middleware = tuple(middleware)
        self.allow_replaced_input = allow_replaced_input
        self.errors = tool_errors if isinstance(tool_errors, ToolErrorPolicy) else ToolErrorPolicy(on_error=tool_errors)
        self.tool_choice = tool_choice

    def check_resume(self, resume: Resume, history: Sequence[Message]) -> ResumePlan:
        """The resume validated against ``history`` and these tools: see :func:`check_resume`."""
        return plan_resume(resume, history, self.tools, allow_replaced_input=self.allow_replaced_input)

    async def run(
        self,
        messages: Sequence[Message],
        *,
        resume: Resume | None = None,
        plan: ResumePlan | None = None,
        on_chunk: ChunkCallback | None = None,
        session: Session | None = None,
        context: dict[str, Any] | None = None,
        reclaimed_from: str | None = None,
        effects: Effects | None = None,
    ) -> GenerateResult:
        """Run one turn over ``messages`` (the history, ending with the new input).

        The model is called with the tool definitions; requested tools run concurrently; the
        turn ends when the model answers without tool requests (its finish reason), or when a
        tool interrupts (``interrupted``). With ``plan`` (or ``resume``), the history must end
        with a paused model message: every paused request is answered (respond) or run again
        (restart), parked outputs are reused, and the loop continues.

        Args:
            messages: the history; not modified.
            resume: answers to the paused requests at the end of ``messages``; validated here,
                once, into a plan (ignored when ``plan`` is given).
            plan: the resume already validated by :meth:`check_resume` (an agent's
                ``check_resume``); carried out without validating again.
            on_chunk: receives model stream chunks and the tool-response chunk of each round.
            session: made available to tools as ``ctx.session``.
            context: the caller's context (identity, tenant), given to tools as ``ctx.context``.
            reclaimed_from: the turn whose lapsed claim this turn took over; tools see it as
                ``ctx.reclaimed_from``.
            effects: the effect journal of the turn (agents with a store pass one): every tool
                body runs through it, so none is silently repeated (:mod:`interlock._engine.effects`).
        """
        turn = _TurnState(
            loop=self,
            on_chunk=on_chunk,
            session=session,
            context=context or {},
            reclaimed_from=reclaimed_from,
            effects=effects,
            history=list(messages),
        )
        return await turn.run(resume, plan)


@dataclass(kw_only=True, slots=True)
class _TurnState:
    """One turn of a :class:`ToolLoop`: what varies per turn, and the history it grows."""

    loop: ToolLoop
    on_chunk: ChunkCallback | None
    session: Session | None
    context: dict[str, Any]
    reclaimed_from: str | None = None
    effects: Effects | None = None
    history: list[Message] = field(default_factory=new_list)
    message_index: int = 0
    errors_sent: dict[str, int] = field(default_factory=new_dict)

    async def emit(self, chunk: ModelChunk) -> None:
        """Forward a chunk, numbered with the index of the message it belongs to within this turn.

        Genkit numbers a turn's messages from 0 (model reply, tool message, next reply, ...);
        its Python client starts a new message whenever the role or the index changes.
        """
        if self.on_chunk is not None:
            if chunk.index != self.message_index:
                chunk = _renumbered(chunk, index=self.message_index)
            result = self.on_chunk(chunk)
            if inspect.isawaitable(result):
                await result

    def tool_error(self, name: str, error: InterlockError, mode: ToolErrors) -> tuple[bool, Any]:
        """Raise ``error`` (failing the turn), or in ``"model"`` mode, within the retry limit, return it as output."""
        sent = self.errors_sent.get(name, 0)
        if mode != "model" or sent >= self.loop.errors.retries:
            raise error
        self.errors_sent[name] = sent + 1
        return True, {"error": error.message}

    def _requester(self, planned: PlannedCall | None) -> object:
        """Who asked for a call: the identity that started this turn, or the one its resumed interrupt recorded."""
        said = recorded(planned.request) if planned is not None else None
        if said is not None:
            return said.get("requester")
        return self.context.get("identity")

    def unknown_tool(self, name: str) -> NotFoundError:
        known = ", ".join(sorted(self.loop.by_name)) or "none"
        return NotFoundError(f"the model asked for tool {name!r}, which this agent does not have (its tools: {known})")

    async def call(self, part: ToolRequestPart, planned: PlannedCall | None, index: int) -> tuple[bool, Any]:
        """Run one tool request; ``(True, output)`` or ``(False, interrupt data)``.

        ``planned`` is a restart the resume plan validated: its input and payload are used as is.
        ``index`` is the position in the history of the model message that asked for the call.
        """
        tool = self.loop.by_name.get(part.name)
        if tool is None:
            return self.tool_error(part.name, self.unknown_tool(part.name), self.loop.errors.on_error)
        retry, reclaimed_from = False, self.reclaimed_from
        if planned is not None and planned.restart is not None:
            value, resumed, resume = planned.value, planned.restart.meta(md.RESUMED), planned.payload
            original_input = planned.original_input
            retry = md.is_in_doubt(planned.request)  # a person answered "run it again"
            data = planned.request.meta(md.INTERRUPT) if retry else None
            if is_object(data):  # the takeover that found it in doubt; the payload it had then
                reclaimed_from = reclaimed_from or data.get(md.RECLAIMED_FROM)
                if resume is None:
                    resumed = data.get(md.RESUMED)
                    resume = tool.validate_resume(resumed)
        else:
            try:
                value = tool.validate_input(part.input)
            except ToolInputError as exc:
                return self.tool_error(tool.name, exc, self.loop.errors.input_mode)
            resumed = resume = None
            original_input = part.input
        ctx: ToolContext[Any] = ToolContext(
            tool=tool.name,
            request=part,
            resumed=resumed,
            resume=resume,
            original_input=original_input,
            session=self.session,
            context=self.context,
            reclaimed_from=reclaimed_from,
        )
        if planned is not None and planned.decision != "deny" and tool.recheck is not None:
            reason = await _recheck(tool, value, ctx)
            if reason is not None:  # consent went stale: ask again instead of running on it
                return False, _reask(tool, planned, reason, self._requester(planned))
        # a restart's input as planned: no middleware or recheck had it (the claim keyed it in the journal)
        untouched = planned is not None and tool.recheck is None and not self.loop.middleware
        try:
            with telemetry.tool_call(part, description=tool.description, resumed=planned is not None) as traced:
                return True, traced.output(await self._through_middleware(tool, ctx, value, index, retry, untouched))
        except Interrupt as signal:
            return False, _pause(tool, signal, part, self._requester(planned))
        except InterlockError:
            raise
        except Exception as exc:
            error = ToolError(f"tool {tool.name!r} failed: {exc}", tool=tool.name)
            error.__cause__ = exc
            return self.tool_error(tool.name, error, self.loop.errors.on_error)

    async def _through_middleware(
        self, tool: Tool[Any, Any, Any], ctx: ToolContext[Any], value: Any, index: int, retry: bool, untouched: bool
    ) -> Any:
        return await self._layer(0, tool, ctx, value, index, retry, untouched)

    async def _layer(
        self,
        depth: int,
        tool: Tool[Any, Any, Any],
        ctx: ToolContext[Any],
        current: object,
        index: int,
        retry: bool,
        untouched: bool = False,
    ) -> Any:
        """Middleware ``depth`` onwards, then the tool.

        A method, not a closure that names itself: that would be a reference cycle holding the
        whole turn until the garbage collector finds it.
        """
        middleware = self.loop.middleware
        if depth < len(middleware):
            return await middleware[depth](ctx, current, lambda v: self._layer(depth + 1, tool, ctx, v, index, retry))
        if self.effects is None or tool.is_interrupt_only:
            return await tool.invoke(current, ctx)
        # the body runs through the effect journal: replayed, retried, or asked about (interlock._engine.effects)
        body = lambda: tool.invoke(current, ctx)  # noqa: E731
        return await self.effects.run(tool, ctx, current, index, body, retry=retry, untouched=untouched)

    async def call_all(
        self, calls: Sequence[tuple[ToolRequestPart, PlannedCall | None]], index: int
    ) -> list[tuple[bool, Any]]:
        if len(calls) == 1:
            part, planned = calls[0]
            return [await self.call(part, planned, index)]
        results = await asyncio.gather(*(self.call(p, planned, index) for p, planned in calls), return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                raise r
        return [r for r in results if not isinstance(r, BaseException)]

    async def run(self, resume: Resume | None, plan: ResumePlan | None) -> GenerateResult:
        """The turn: carry out the resume (``plan``, or ``resume`` validated here), then the model rounds."""
        loop = self.loop
        if plan is None and resume is not None:
            _plan_for(self, ResumePlan(resume=resume))  # the precondition comes first
            plan = loop.check_resume(resume, self.history)
            if check_answers(plan, self.context.get("identity")):  # a bare tool loop keeps no votes
                raise FailedPreconditionError("a quorum vote needs a server-managed agent (its store keeps the votes)")
        elif plan is not None and not plan.schemas_checked and loop.tools:
            plan = loop.check_resume(plan.resume, self.history)
        if plan is not None:
            plan = collapse(self.history, plan, loop.by_name)  # answers to surfaced interrupts go to their delegation
            if await _resume(self, plan):
                return GenerateResult(
                    messages=expand(self.history), finish_reason="interrupted", finish_message=REINTERRUPTED
                )
        return await self._rounds()

    async def _rounds(self) -> GenerateResult:
        """Call the model, run the tools it asks for, until it answers without tool requests or a tool pauses."""
        loop, history = self.loop, self.history
        emit = self.emit if self.on_chunk is not None else None
        calls = 0
        rounds = 0
        while True:
            request = ModelRequest(
                messages=list(history), tools=list(loop.definitions), config=loop.config, tool_choice=loop.tool_choice
            )
            response = await telemetry.call_model(loop.model, request, on_chunk=emit)
            self.message_index += 1
            calls += 1
            message = response.message
            check_reply(message, "the model's reply")  # refused before it is stored, on every store alike
            if message.role != "model":
                message = Message(role="model", content=message.content, metadata=message.metadata, extra=message.extra)
            if not message.tool_requests:
                history.append(message)
                return GenerateResult(
                    messages=history,
                    finish_reason=response.finish_reason,
                    finish_message=response.finish_message,
                    usage=response.usage,
                    model_calls=calls,
                )
            if rounds >= loop.max_turns:
                raise MaxTurnsExceededError(
                    f"the model kept calling tools past max_turns={loop.max_turns}; "
                    "raise max_turns or check the tools' outputs"
                )
            rounds += 1
            model_msg, tool_msg = await _run_requests(self, message)
            history.append(model_msg)
            if tool_msg is None:
                return GenerateResult(
                    messages=expand(history), finish_reason="interrupted", usage=response.usage, model_calls=calls
                )
            history.append(tool_msg)
            await self.emit(ModelChunk(role="tool", content=list(tool_msg.content)))
            self.message_index += 1


_renumbered = evolver(ModelChunk)


def _pause(tool: Tool[Any, Any, Any], signal: Interrupt, part: ToolRequestPart, requester: object) -> dict[str, Any]:
    """The metadata a paused request gets: ``interrupt`` (its data), ``deadline`` and ``answerPolicy``.

    ``answerPolicy`` is :func:`interlock.interrupts._policy.pause_record`'s, for a tool with a policy.
    """
    value = md.interrupt_value(signal.data)
    deadline = deadline_metadata(
        tool, value, expires_in=signal.expires_in, on_expire=signal.on_expire, warn_before=signal.warn_before
    )
    meta = {md.INTERRUPT: value} if deadline is None else {md.INTERRUPT: value, md.DEADLINE: deadline}
    policy = pause_record(tool.policies, signal.policy, part.meta(md.REPLACED_INPUT, part.input), requester)
    return meta if policy is None else {**meta, md.POLICY: policy}


async def _recheck(tool: Tool[Any, Any, Any], value: object, ctx: ToolContext[Any]) -> str | None:
    """The tool's recheck on a resumed call: why its approval no longer holds, or ``None``."""
    assert tool.recheck is not None
    try:
        said = tool.recheck(value, ctx)
        if inspect.isawaitable(said):
            said = await said
    except Exception as exc:  # the call does not run on an approval nobody could confirm
        raise ToolError(f"the recheck of tool {tool.name!r} failed: {exc}", tool=tool.name) from exc
    if said is None:
        return None
    if not isinstance(said, str) or not said:
        raise UsageError(f"the recheck of tool {tool.name!r} returned {said!r}; it returns a reason (text) or None")
    return said


def _reask(tool: Tool[Any, Any, Any], planned: PlannedCall, reason: str, requester: object) -> dict[str, Any]:
    """A fresh interrupt for an approved call whose recheck failed: the same question, and why it is asked again."""
    request = planned.request
    signal = Interrupt(request.meta(md.INTERRUPT))
    meta = _pause(tool, signal, planned.restart or request, requester)
    telemetry.reasked(request, reason)
    return {**meta, md.REASKED: {"reason": reason, "at": utcnow().isoformat()}}


def _response(part: ToolRequestPart, output: object, metadata: dict[str, Any] | None = None) -> ToolResponsePart:
    return ToolResponsePart(name=part.name, ref=part.ref, output=output, metadata=metadata)


def _paused(message: Message, outcomes: dict[int, tuple[bool, Any]]) -> Message:
    """The model message with ``interrupt`` on paused requests and ``pendingOutput`` on finished ones."""
    content: list[Part] = []
    for i, part in enumerate(message.content):
        if i in outcomes and isinstance(part, ToolRequestPart):
            ok, value = outcomes[i]
            part = with_metadata(part, **({md.PENDING_OUTPUT: value} if ok else value))
        content.append(part)
    return Message(role=message.role, content=content, metadata=message.metadata, extra=message.extra)


async def _run_requests(loop: _TurnState, message: Message) -> tuple[Message, Message | None]:
    """Run a model message's tool requests; returns (model message, tool message or None if paused)."""
    indexed = [(i, p) for i, p in enumerate(message.content) if isinstance(p, ToolRequestPart)]
    results = await loop.call_all([(p, None) for _, p in indexed], len(loop.history))
    outcomes = {i: r for (i, _), r in zip(indexed, results, strict=True)}
    if not all(ok for ok, _ in results):
        return _paused(message, outcomes), None
    tool_msg = Message(
        role="tool", content=[_response(p, out) for (_, p), (_, out) in zip(indexed, results, strict=True)]
    )
    return message, tool_msg


def check_resume(
    resume: Resume,
    history: Sequence[Message],
    tools: Sequence[Tool[Any, Any, Any]],
    *,
    allow_replaced_input: bool = False,
) -> ResumePlan:
    """Everything a resume must pass before anything runs, once: the plan the tool loop carries out.

    :func:`~interlock.validate_resume` plus the tools' schemas: respond outputs must fit
    the tool's output schema (except a denial of a middleware hold, which is a note to the
    model); restarts must carry a valid input and resume payload. See
    :func:`~interlock.interrupts.plan_resume`.
    """
    return plan_resume(resume, history, tools, allow_replaced_input=allow_replaced_input)


def _plan_for(loop: _TurnState, plan: ResumePlan) -> list[PlannedCall]:
    """The plan's calls, checked to be about ``loop.history``'s paused message."""
    last = loop.history[-1] if loop.history else None
    if last is None or last.role != "model" or not last.tool_requests:
        raise FailedPreconditionError(
            "Cannot 'resume' generation unless the previous message is a model message with at least one tool request."
        )
    content = last.content
    for c in plan.calls:
        if c.index >= len(content) or (content[c.index] is not c.request and content[c.index] != c.request):
            raise FailedPreconditionError("the resume plan was made for another history; build it from this one")
    return list(plan.calls)


async def _resume(loop: _TurnState, plan: ResumePlan) -> bool:
    """Carry out a validated resume plan on ``loop.history``; True when a restarted tool paused again."""
    planned = _plan_for(loop, plan)  # first: it checks the history ends with a paused model message
    history = loop.history
    last = history[-1]
    content = list(last.content)
    responses: dict[int, ToolResponsePart] = {}
    restarts: list[PlannedCall] = []
    for c in planned:
        part = c.request
        if c.verb == "pending":
            responses[c.index] = _response(part, part.meta(md.PENDING_OUTPUT), {md.SOURCE: md.PENDING})
            content[c.index] = with_metadata(part, drop=(md.PENDING_OUTPUT,))
        elif c.verb == "respond" and c.response is not None:
            responses[c.index] = c.response
            if loop.effects is not None and md.is_in_doubt(part):  # a person says it did happen: record it
                data = part.meta(md.INTERRUPT)
                key = data.get("idempotencyKey") if is_object(data) else None
                if isinstance(key, str):
                    await loop.effects.mark_done(key, c.response.output)
            content[c.index] = with_metadata(
                part, drop=(md.INTERRUPT, md.DEADLINE), **{md.RESOLVED_INTERRUPT: part.meta(md.INTERRUPT)}
            )
        elif c.restart is not None:
            restarts.append(c)
    calls = [(c.restart, c) for c in restarts if c.restart is not None]
    results = await loop.call_all(calls, len(history) - 1) if restarts else []
    paused_again = False
    for c, (ok, value) in zip(restarts, results, strict=True):
        assert c.restart is not None
        original = c.request
        updates: dict[str, Any] = {}
        if c.replaced:
            # history keeps the input the tool ran with, and records the one it replaced
            original = replace(original, input=c.restart.input)
            updates[md.REPLACED_INPUT] = c.original_input
        if ok:
            responses[c.index] = _response(original, value)
            updates[md.RESOLVED_INTERRUPT] = original.meta(md.INTERRUPT)
            content[c.index] = with_metadata(original, drop=(md.INTERRUPT, md.DEADLINE), **updates)
        else:
            paused_again = True
            content[c.index] = with_metadata(original, drop=(md.DEADLINE,), **value, **updates)
    if paused_again:
        for i, response in responses.items():
            content[i] = with_metadata(content[i], **{md.PENDING_OUTPUT: response.output})
        history[-1] = Message(role=last.role, content=content, metadata=last.metadata, extra=last.extra)
        return True
    history[-1] = Message(role=last.role, content=content, metadata=last.metadata, extra=last.extra)
    resume = plan.resume
    tool_msg = Message(
        role="tool",
        content=[responses[i] for i in sorted(responses)],
        metadata={md.RESUMED: resume.metadata if resume.metadata is not None else True},
    )
    history.append(tool_msg)
    await loop.emit(ModelChunk(role="tool", content=list(tool_msg.content)))
    loop.message_index += 1
    return False


async def generate(
    model: Model,
    messages: Sequence[Message],
    *,
    tools: Sequence[Tool[Any, Any, Any]] = (),
    resume: Resume | None = None,
    plan: ResumePlan | None = None,
    config: dict[str, Any] | None = None,
    max_turns: int = 5,
    on_chunk: ChunkCallback | None = None,
    middleware: Sequence[ToolMiddleware] = (),
    session: Session | None = None,
    context: dict[str, Any] | None = None,
    allow_replaced_input: bool = False,
    tool_errors: ToolErrors = "raise",
    tool_input_errors: ToolErrors | None = None,
    tool_retries: int = 2,
    tool_choice: Any = None,
    reclaimed_from: str | None = None,
    effects: Effects | None = None,
) -> GenerateResult:
    """Run one turn of the tool loop over ``messages``: a :class:`ToolLoop` built and run once.

    The settings are :class:`ToolLoop`'s (``tool_errors``, ``tool_input_errors`` and
    ``tool_retries`` are :class:`ToolErrorPolicy`'s ``on_error``, ``on_input_error`` and
    ``retries``); the rest are :meth:`ToolLoop.run`'s. An agent builds its loop once instead.
    """
    loop = ToolLoop(
        model,
        tools=tools,
        config=config,
        max_turns=max_turns,
        middleware=middleware,
        allow_replaced_input=allow_replaced_input,
        tool_errors=ToolErrorPolicy(on_error=tool_errors, on_input_error=tool_input_errors, retries=tool_retries),
        tool_choice=tool_choice,
    )
    return await loop.run(
        messages,
        resume=resume,
        plan=plan,
        on_chunk=on_chunk,
        session=session,
        context=context,
        reclaimed_from=reclaimed_from,
        effects=effects,
    )
