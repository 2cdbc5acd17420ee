"""The banker demo: a transfer pauses for a person's approval, persists, and resumes.

``interlock demo`` runs a banker agent on the embedded local model (or ``--model
provider/name``) over a SQLite store. ``transferMoney`` is a resumable tool: it pauses the
turn with typed data (to, amount, reason) and takes a typed confirmation; ``getBalance``
runs freely. The demo streams the reply, shows the pending approval, asks approve/reject
(or takes ``--yes``/``--no``), resumes, and prints the outcome.

The outcome line is written by the demo from the tool's own result, not by the model: a
0.5B model is unreliable on the turn after a tool result, and a person must see what
really happened. The model's own words are shown next to it, labelled.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import pathlib
import sys
import threading
import time
from typing import Any

from pydantic import BaseModel, Field

from .._engine.io import AgentOutput, StreamChunk
from ..agents._agent import Agent, PromptAgent
from ..errors import InterlockError
from ..interrupts._plan import Resume, interrupt_as
from ..messages import Message
from ..models import Model, ModelChunk, ModelRequest, ModelResponse
from ..parts import TextPart, ToolRequestPart
from ..stores.sqlite import SQLiteStore
from ..tools._tool import ToolContext, tool
from ._main import Command, CommandError, register

__all__ = ["Confirmation", "Ledger", "TransferApproval", "TransferRequest", "agents", "banker", "default_store_path"]

INSTRUCTIONS = (
    "You are a helpful bank assistant. To send money, call transferMoney with the recipient, the amount in dollars "
    "and the reason. To tell the balance, call getBalance."
)
DEFAULT_PROMPT = "Please send $150 to Alice for dinner."
STARTING_BALANCE = 1000.0


class TransferRequest(BaseModel):
    """What the model asks for."""

    to: str = Field(description="who receives the money")
    amount: float = Field(gt=0, description="the amount in dollars")
    reason: str = Field(default="", description="what the money is for")


class TransferApproval(BaseModel):
    """The interrupt data a person sees."""

    to: str
    amount: float
    reason: str


class Confirmation(BaseModel):
    """A person's answer to a transfer approval."""

    approved: bool
    note: str = ""


class Ledger:
    """The bank's side effects: a JSON file beside the store, written atomically."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = pathlib.Path(path)

    @classmethod
    def beside(cls, store_path: str | os.PathLike[str]) -> Ledger:
        return cls(f"{os.fspath(store_path)}.ledger.json")

    def read(self) -> dict[str, Any]:
        if not self.path.exists():
            return {"balance": STARTING_BALANCE, "transfers": []}
        return json.loads(self.path.read_text())

    def transfer(self, to: str, amount: float, reason: str) -> dict[str, Any]:
        book = self.read()
        if amount > book["balance"]:
            return {"status": "failed", "reason": "insufficient funds", "balance": book["balance"]}
        book["balance"] = round(book["balance"] - amount, 2)
        book["transfers"].append({"to": to, "amount": amount, "reason": reason})
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(book, indent=2))
        os.replace(tmp, self.path)
        return {"status": "sent", "to": to, "amount": amount, "balance": book["balance"]}


def banker(model: Model, store: SQLiteStore, ledger: Ledger) -> PromptAgent:
    """The banker agent: ``transferMoney`` pauses for approval, ``getBalance`` runs freely."""

    @tool(name="transferMoney")
    async def transfer_money(
        req: TransferRequest, ctx: ToolContext[Any], confirmation: Confirmation | None
    ) -> dict[str, Any]:
        """Transfer money from the user's account to someone else. A person must approve it."""
        if confirmation is None:
            ctx.interrupt(TransferApproval(to=req.to, amount=req.amount, reason=req.reason))
        if not confirmation.approved:
            return {"status": "rejected", "note": confirmation.note}
        return ledger.transfer(req.to, req.amount, req.reason)

    @tool(name="getBalance")
    def get_balance(_: dict[str, Any]) -> dict[str, Any]:
        """Get the user's current account balance in dollars."""
        return {"balance": ledger.read()["balance"]}

    return PromptAgent("banker", model, instructions=INSTRUCTIONS, tools=[transfer_money, get_balance], store=store)


def default_store_path() -> pathlib.Path:
    """Where the demo keeps its sessions: ``$INTERLOCK_DEMO_STORE`` or the user data dir."""
    env = os.environ.get("INTERLOCK_DEMO_STORE")
    if env:
        return pathlib.Path(env)
    base = pathlib.Path(os.environ.get("XDG_DATA_HOME") or pathlib.Path.home() / ".local" / "share")
    return base / "interlock" / "demo.db"


SCRIPTED = "scripted"
"""``--model scripted``: a fixed script instead of a model (no LLM, no download), for smoke runs."""


def _scripted_answer(request: ModelRequest) -> ModelResponse:
    """The script: ask to send $150 to Alice for dinner; after the tool's result, say that it answered."""
    if request.messages and request.messages[-1].tool_responses:
        return ModelResponse(message=Message.model("The transfer tool has answered; its result is below."))
    ask = {"to": "Alice", "amount": 150, "reason": "dinner"}
    call = ToolRequestPart(name="transferMoney", ref="scripted-1", input=ask)
    text = TextPart(text="I'll send $150 to Alice for dinner.")
    return ModelResponse(message=Message(role="model", content=[text, call]))


def _model(name: str | None) -> Model:
    if name == SCRIPTED:
        from ..testing import ScriptedModel

        return ScriptedModel([_scripted_answer] * 16, name=SCRIPTED)
    if name:
        from ..models import resolve_model

        return resolve_model(name)
    from ..models._local import LocalModel

    return LocalModel()


def agents(store: SQLiteStore) -> list[Agent]:
    """The demo's agents over ``store`` (for ``interlock inbox ... --agents interlock.cli.demo:agents``)."""
    return [banker(_model(os.environ.get("INTERLOCK_DEMO_MODEL")), store, Ledger.beside(store.path))]


class _Reply:
    """Prints a model's reply after ``label``.

    A progress line on stderr until its first words arrive, then the streamed text (or, from a
    model that does not stream, the output's text at the end).
    """

    def __init__(self, label: str) -> None:
        self.label = label
        self._started = False
        self._ticker: asyncio.Task[None] | None = None

    def __enter__(self) -> _Reply:
        if sys.stderr.isatty():
            self._ticker = asyncio.ensure_future(self._tick())
        else:
            print("(waiting for the model's answer...)", file=sys.stderr, flush=True)
        return self

    async def _tick(self) -> None:
        started = time.monotonic()
        while True:
            sys.stderr.write(f"\r(waiting for the model's answer... {time.monotonic() - started:.0f} s)")
            sys.stderr.flush()
            await asyncio.sleep(0.5)

    def _stop_ticker(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()

    def __call__(self, chunk: StreamChunk) -> None:
        if isinstance(chunk, ModelChunk) and chunk.role == "model" and chunk.text:
            if not self._started:
                self._started = True
                self._stop_ticker()
                print(self.label, end="", flush=True)
            print(chunk.text, end="", flush=True)

    def __exit__(self, *exc: object) -> None:
        self._stop_ticker()

    def finish(self, output: AgentOutput) -> None:
        """End the reply: a newline after streamed text, or the label and the output's text."""
        print("" if self._started else f"{self.label}{output.text}", flush=True)


async def _read_line() -> str:
    """A line from standard input, read on a daemon thread.

    Ctrl-C (which cancels the event loop's main task) then ends the demo at once instead of
    waiting for the line, and the reading thread dies with the process.
    """
    loop = asyncio.get_running_loop()
    line: asyncio.Future[str] = loop.create_future()

    def read() -> None:
        text = sys.stdin.readline()
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits for the line any more
            loop.call_soon_threadsafe(lambda: line.done() or line.set_result(text))

    threading.Thread(target=read, name="interlock-demo-prompt", daemon=True).start()
    return await line


async def _ask(prompt: str) -> bool:
    while True:
        print(prompt, end="", flush=True)
        line = await _read_line()
        if not line:
            raise CommandError("no answer on standard input; use --yes or --no", code=1)
        answer = line.strip().lower()
        if answer in ("y", "yes", "a", "approve"):
            return True
        if answer in ("n", "no", "r", "reject"):
            return False
        print("please answer y (approve) or n (reject)")


def _outcome(output: AgentOutput) -> str:
    for message in reversed(output.state.messages if output.state else []):
        for response in message.tool_responses:
            if response.name == "transferMoney":
                return json.dumps(response.output)
    return "no transfer result"


async def _run(args: argparse.Namespace) -> int:
    path = pathlib.Path(args.store) if args.store else default_store_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    ledger = Ledger.beside(path)
    async with SQLiteStore(path) as store:
        agent = banker(_model(args.model), store, ledger)
        print(f"you: {args.prompt}", flush=True)
        with _Reply("banker: ") as reply:
            out = await agent.run(args.prompt, on_chunk=reply)
        out.raise_for_error()
        reply.finish(out)
        if out.finish_reason != "interrupted":
            balance = ledger.read()["balance"]
            print(f"(the model answered without asking for a transfer; nothing was sent; balance {balance})")
            return 0
        call = out.interrupts[0]
        data = interrupt_as(TransferApproval, call)
        print(f"\nPENDING APPROVAL  transferMoney: ${data.amount:,.2f} to {data.to} (reason: {data.reason or '-'})")
        print(f"                  snapshot {out.snapshot_id}")
        if args.later:
            print("\nThe turn is paused and saved. Resume it from any process with:")
            print(f"  interlock inbox approve {out.snapshot_id} --store {path} --agents interlock.cli.demo:agents")
            print(f"  interlock inbox reject  {out.snapshot_id} --store {path} --agents interlock.cli.demo:agents")
            return 0
        approved = args.yes if args.yes or args.no else await _ask("Approve this transfer? [y/n] ")
        print("approved" if approved else "rejected", "- resuming the turn", flush=True)
        transfer = next(t for t in agent.tools if t.name == "transferMoney")
        claimed = transfer.interrupted(call)
        assert claimed is not None
        who = os.environ.get("USER") or "demo-user"
        note = f"{'approved' if approved else 'rejected'} by {who} in the terminal"
        restart = claimed.restart(Confirmation(approved=approved, note=note))
        with _Reply("banker (the model's own words): ") as reply:
            done = await agent.run(
                resume=Resume(restart=[restart]), snapshot_id=out.snapshot_id, context={"identity": who}, on_chunk=reply
            )
        done.raise_for_error()
        reply.finish(done)
        snap = await agent.get_snapshot(done.snapshot_id)
        print(f"\nOUTCOME (from the tool, not the model): {_outcome(AgentOutput(state=snap.state))}")
        print(f"balance now: ${ledger.read()['balance']:,.2f}   (ledger: {ledger.path})")
        return 0


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("prompt", nargs="?", default=DEFAULT_PROMPT, help="what to ask the banker")
    answer = parser.add_mutually_exclusive_group()
    answer.add_argument("--yes", action="store_true", help="approve without asking")
    answer.add_argument("--no", action="store_true", help="reject without asking")
    answer.add_argument("--later", action="store_true", help="stop at the pause and print how to resume it")
    parser.add_argument(
        "--model",
        help="a provider/model name, or 'scripted' (a fixed script, no LLM); default: the embedded local model",
    )
    parser.add_argument("--store", help=f"the SQLite file for sessions (default: {default_store_path()})")


def _main(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_run(args))
    except ImportError as exc:  # a missing extra: the message names it
        raise CommandError(str(exc), code=1) from None
    except InterlockError as exc:  # a missing key, an unreachable server, a refused request: one line
        raise CommandError(f"{exc.message} ({exc.status})", code=1) from None


register(
    Command(
        name="demo",
        help="the banker demo: a transfer that waits for your approval",
        configure=_configure,
        run=_main,
        log_level="error",  # a failure is the one line the demo prints; retries show with --log-level warning
    )
)
