"""Drive one interop scenario with the published Genkit Python client (PyPI ``genkit``, ``genkit.exp``).

    .interop/py/bin/python tests/kit/interop/py_client.py <agent url> <scenario>

Prints one line of JSON: what the client saw (results, chunks, errors, its own message
history). tests/integration/test_interop.py makes the assertions. Exit code 0 when the scenario ran
to its end, 1 when the client raised something the scenario did not expect, 2 on bad usage.

Runs in its own virtual environment (``.interop/py``, made by scripts/setup_interop.sh),
never in interlock's: it imports nothing from interlock. genkit 0.12.0 has the agent
client under ``genkit.exp`` (0.9-0.11 had it under ``genkit.agent``).
"""
# pyright: reportMissingImports=false, reportUnknownMemberType=false, reportUnknownVariableType=false
# pyright: reportUnknownArgumentType=false, reportUnknownParameterType=false, reportMissingParameterType=false
# pyright: reportUnknownLambdaType=false

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from genkit import Part
from genkit.exp import remote_agent

NON_ASCII = "caf\u00e9 \u2615 \u65e5\u672c \U0001f600"
"""Multi-byte UTF-8 (2, 3 and 4 bytes), as in js_client.cjs."""


def dump(value: Any) -> Any:
    """The wire JSON of a genkit model (camelCase, no nulls), recursively."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple)):
        return [dump(v) for v in value]
    if isinstance(value, dict):
        return {k: dump(v) for k, v in value.items()}
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    if hasattr(value, "value"):  # enums
        return value.value
    return str(value)


def turn_info(res: Any) -> dict[str, Any]:
    return {
        "text": res.text,
        "finishReason": dump(res.finish_reason),
        "snapshotId": res.snapshot_id,
        "sessionId": res.session_id,
        "interrupts": [{"name": i.name, "ref": i.ref, "input": dump(i.input)} for i in res.interrupts],
        "message": dump(res.message),
        "state": dump(res.raw.state),
    }


def error_info(e: BaseException) -> dict[str, Any]:
    return {"name": type(e).__name__, "status": getattr(e, "status", None), "message": str(e)}


async def capture(fn: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
    """``{"ok": value}`` or ``{"error": {...}}`` for what ``fn`` raised (the scenario expected it might)."""
    try:
        return {"ok": dump(await fn())}
    except Exception as e:
        return {"error": error_info(e)}


async def drain(turn: Any) -> tuple[list[Any], Any]:
    chunks = [dump(c.raw) async for c in turn.stream]
    return chunks, await turn.response


def streamed_interrupts(chunks: list[Any]) -> list[Any]:
    """The paused tool requests a turn streamed (parts of its model chunks with ``metadata.interrupt``)."""
    parts = [p for c in chunks for p in (c.get("modelChunk") or {}).get("content", [])]
    return [p for p in parts if "toolRequest" in p and (p.get("metadata") or {}).get("interrupt")]


def server_agent(url: str) -> Any:
    return remote_agent(url, state_management="server")


async def stream(url: str) -> dict[str, Any]:
    """A streamed first turn, then a streamed second one with non-ASCII text."""
    chat = server_agent(url).chat()
    chunks, response = await drain(chat.send_stream("hello"))
    second_chunks, second = await drain(chat.send_stream(NON_ASCII))
    return {
        "chunks": chunks,
        "result": turn_info(response),
        "secondChunks": second_chunks,
        "second": turn_info(second),
        "messages": dump(chat.messages),
    }


async def interrupt_respond(url: str) -> dict[str, Any]:
    """An interrupt, answered with respond (streamed, to see the tool chunk)."""
    chat = server_agent(url).chat()
    paused_chunks, first = await drain(chat.send_stream("transfer 100 to acct-1"))
    answer = first.interrupts[0].respond({"approved": True, "by": "py"})
    chunks, response = await drain(chat.resume_stream(respond=[answer]))
    return {
        "interrupted": turn_info(first),
        "interruptedChunks": paused_chunks,
        "streamedInterrupts": streamed_interrupts(paused_chunks),
        "resumed": turn_info(response),
        "chunks": chunks,
        "messages": dump(chat.messages),
    }


async def interrupt_restart(url: str) -> dict[str, Any]:
    """An interrupt, restarted plainly (the tool pauses again), then with resumed metadata."""
    chat = server_agent(url).chat()
    first = await chat.send("deploy please")
    plain = await chat.resume(restart=[first.interrupts[0].restart()])
    restarted = await chat.resume(restart=[plain.interrupts[0].restart(resumed_metadata={"approvedBy": "py"})])
    return {
        "interrupted": turn_info(first),
        "plain": turn_info(plain),
        "restarted": turn_info(restarted),
        "messages": dump(chat.messages),
    }


async def snapshots(url: str) -> dict[str, Any]:
    """get_snapshot by snapshot id and by session id."""
    agent = server_agent(url)
    chat = agent.chat()
    one = await chat.send("one")
    two = await chat.send("two")
    return {
        "first": turn_info(one),
        "second": turn_info(two),
        "byId": dump(await agent.get_snapshot(snapshot_id=two.snapshot_id)),
        "firstById": dump(await agent.get_snapshot(snapshot_id=one.snapshot_id)),
        "bySession": dump(await agent.get_snapshot(session_id=two.session_id)),
    }


async def load_chat(url: str) -> dict[str, Any]:
    """load_chat (by snapshot id, then by session id), then send on the loaded chat."""
    agent = server_agent(url)
    first = await agent.chat().send("first")
    loaded = await agent.load_chat(snapshot_id=first.snapshot_id)
    loaded_snapshot_id, loaded_messages = loaded.snapshot_id, dump(loaded.messages)
    second = await loaded.send("second")
    by_session = await agent.load_chat(session_id=first.session_id)
    by_session_snapshot_id, by_session_messages = by_session.snapshot_id, dump(by_session.messages)
    third = await by_session.send("third")
    return {
        "first": turn_info(first),
        "loadedMessages": loaded_messages,
        "loadedSnapshotId": loaded_snapshot_id,
        "second": turn_info(second),
        "messages": dump(loaded.messages),
        "bySessionSnapshotId": by_session_snapshot_id,
        "bySessionMessages": by_session_messages,
        "third": turn_info(third),
    }


async def detach_wait(url: str) -> dict[str, Any]:
    """Detach, poll once (the model waits for that poll), then wait for the result."""
    agent = server_agent(url)
    chat = agent.chat()
    task = await chat.detach("slow job")
    first = await agent.get_snapshot(snapshot_id=task.snapshot_id)
    done = await task.wait(interval=0.1)
    return {
        "snapshotId": task.snapshot_id,
        "sessionId": chat.session_id,
        "first": dump(first),
        "done": dump(done),
    }


async def detach_abort(url: str) -> dict[str, Any]:
    """Detach, then abort the running turn from the client."""
    agent = server_agent(url)
    chat = agent.chat()
    task = await chat.detach("job to abort")
    before = await agent.get_snapshot(snapshot_id=task.snapshot_id)
    previous = await task.abort()
    after = await task.wait(interval=0.1)
    again = await agent.abort(task.snapshot_id)
    return {
        "snapshotId": task.snapshot_id,
        "sessionId": chat.session_id,
        "before": dump(before),
        "previous": dump(previous),
        "after": dump(after),
        "again": dump(again),
    }


async def client_managed(url: str) -> dict[str, Any]:
    """A client-managed agent: the client rebuilds its history from the streamed chunks and sends it as state."""
    chat = remote_agent(url, state_management="client").chat()
    chunks, hello = await drain(chat.send_stream("hi"))
    paused_chunks, interrupted = await drain(chat.send_stream("please approve"))
    resumed = await chat.resume(respond=[interrupted.interrupts[0].respond({"approved": False})])
    after = await chat.send("thanks")
    return {
        "chunks": chunks,
        "streamedInterrupts": streamed_interrupts(paused_chunks),
        "results": [turn_info(r) for r in (hello, interrupted, resumed, after)],
        "messages": dump(chat.messages),
    }


async def client_managed_signed(url: str) -> dict[str, Any]:
    """The same conversation with an agent that signs its state (the client carries it back unchanged)."""
    return await client_managed(url)


async def errors(url: str) -> dict[str, Any]:
    """Errors: unknown snapshot, state sent to a store agent, abort of an unknown id, a stray resume.

    The Python client refuses ``chat(messages=...)`` on a ``state_management="server"``
    client before any request, so the "state sent to a store agent" case uses a
    client-managed client pointed at the store agent: that sends ``init.state`` on the wire.
    """
    agent = server_agent(url)
    out: dict[str, Any] = {}
    out["getUnknown"] = await capture(lambda: agent.get_snapshot(snapshot_id="does-not-exist"))
    out["sendUnknown"] = await capture(lambda: agent.chat(snapshot_id="does-not-exist").send("hi"))
    misconfigured = remote_agent(url, state_management="client")
    out["stateToStoreAgent"] = await capture(lambda: misconfigured.chat(messages=[]).send("hi"))
    out["abortUnknown"] = await capture(lambda: agent.abort("does-not-exist"))
    chat = agent.chat()
    out["good"] = turn_info(await chat.send("hi"))
    stray = Part.from_tool_response(name="approveTransfer", ref="nope", output={"approved": True})
    out["badResume"] = await capture(lambda: chat.resume(respond=[stray]))
    out["after"] = turn_info(await chat.send("again"))
    out["messages"] = dump(chat.messages)
    return out


SCENARIOS: dict[str, Callable[[str], Awaitable[dict[str, Any]]]] = {
    f.__name__: f
    for f in (
        stream,
        interrupt_respond,
        interrupt_restart,
        snapshots,
        load_chat,
        detach_wait,
        detach_abort,
        client_managed,
        client_managed_signed,
        errors,
    )
}


async def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1] not in SCENARIOS:
        print(f"usage: py_client.py <agent url> <{'|'.join(SCENARIOS)}>", file=sys.stderr)
        return 2
    url, name = argv
    try:
        out: dict[str, Any] = {"ok": True, "report": await SCENARIOS[name](url)}
    except Exception as e:
        import traceback

        out = {"ok": False, "error": error_info(e), "stack": traceback.format_exc()}
    print(json.dumps(out), flush=True)
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
