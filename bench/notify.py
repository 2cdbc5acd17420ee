"""What notifications and deadlines cost on SQLite: the interrupt cycle with and without the outbox,
webhook delivery throughput to a receiver on 127.0.0.1, and a deadline sweep.

* cycle: pause -> approve -> finish on a server-managed agent (scripted model), CPU ms
  (``time.process_time``, every thread) per cycle, ``notify`` off (no outbox rows) vs on (an
  ``interrupt.created`` and an ``interrupt.answered`` row written inside the two commits) vs on
  with a deadline (plus a timer row); the median of interleaved runs;
* delivery: signed events delivered per second by one :class:`~interlock.notify._webhooks.Webhooks`
  pass loop to a local ``ThreadingHTTPServer`` (the receiver's own cost included);
* sweep: ms per expired ``reject`` deadline applied (the resumed turn included).

There is no target yet: the figures are printed for comparison.

    python bench/notify.py [--cycles 100] [--runs 3] [--events 500]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import pathlib
import statistics
import sys
import tempfile
import time
from typing import Any

from interlock.inbox._inbox import Inbox
from interlock.notify._deadlines import sweep
from interlock.notify._webhooks import Webhooks
from interlock.records._outbox import WEBHOOK, new_event
from interlock.stores.sqlite import SQLiteStore

KIT = pathlib.Path(__file__).resolve().parents[1] / "tests" / "kit"
sys.path.insert(0, str(KIT))  # the tests' bank agent and their real receiver on 127.0.0.1
notify_app: Any = importlib.import_module("notify_app")
hook_receiver: Any = importlib.import_module("hook_receiver")
KEYRING, POLICIES, bank, receiver = notify_app.KEYRING, notify_app.POLICIES, notify_app.bank, hook_receiver.receiver


async def cycles(path: pathlib.Path, n: int, *, notify: bool, deadline: bool) -> float:
    """CPU ms per pause -> approve cycle."""
    async with SQLiteStore(path) as store:
        agent = bank(store, notify=notify, tokens=False, expires_in=3600 if deadline else None)
        inbox = Inbox(store, agents=[agent])
        await agent.run("warm up")
        start = time.process_time()
        for _ in range(n):
            out = await agent.run("pay bob 5")
            await inbox.approve(out.snapshot_id or "", identity="bench")
        return (time.process_time() - start) * 1000 / n


async def delivery(path: pathlib.Path, n: int) -> float:
    """Events per second delivered (wall clock)."""
    async with SQLiteStore(path) as store:
        await store.save_all(
            [], events=[new_event(WEBHOOK, "interrupt.created", {"n": i}, tenant=None) for i in range(n)]
        )
        with receiver() as hook:
            hooks = Webhooks([hook.url], KEYRING, batch=100)
            start = time.perf_counter()
            done = 0
            while done < n:
                done += len(await hooks.deliver_due(store))
            return n / (time.perf_counter() - start)


async def sweeping(path: pathlib.Path, n: int) -> float:
    """Wall ms per expired reject deadline applied."""
    async with SQLiteStore(path) as store:
        agent = bank(store, expires_in=0.5, on_expire=POLICIES["reject"], tokens=False)
        for _ in range(n):
            await agent.run("pay bob 5")
        await asyncio.sleep(0.6)
        start = time.perf_counter()
        applied = 0
        while applied < n:
            applied += sum(d.result == "applied" for d in await sweep(store, [agent], limit=100))
        return (time.perf_counter() - start) * 1000 / n


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        settings = {"notify off": (False, False), "notify on": (True, False), "notify + deadline": (True, True)}
        figures: dict[str, list[float]] = {name: [] for name in settings}
        for run in range(args.runs):
            for name, (notify, deadline) in settings.items():
                db = root / f"{name.replace(' ', '_')}-{run}.db"
                figures[name].append(await cycles(db, args.cycles, notify=notify, deadline=deadline))
        base = statistics.median(figures["notify off"])
        print(f"interrupt cycle on SQLite, CPU ms per cycle (median of {args.runs} runs of {args.cycles}):")
        for name, values in figures.items():
            median = statistics.median(values)
            print(f"  {name:<18} {median:7.2f} ms   {median / base:5.2f}x")
        rate = await delivery(root / "delivery.db", args.events)
        print(f"webhook delivery to a receiver on 127.0.0.1: {rate:7.0f} events/s ({args.events} events)")
        per: Any = await sweeping(root / "sweep.db", min(args.cycles, 50))
        print(f"deadline sweep, reject applied (resumed turn included): {per:6.2f} ms per deadline")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--events", type=int, default=500)
    asyncio.run(main(parser.parse_args()))
