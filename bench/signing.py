"""Signed client state: signing and verification cost per turn for a 200-message state (CPU µs)."""

from __future__ import annotations

import statistics
import time

from interlock import Message, ToolRequestPart
from interlock.interrupts._signing import Keyring
from interlock.records._sessions import SessionState

KEYS = Keyring({"k1": "bench-key-0123456789abcdef0123456789abcdef"})


def state(n: int) -> SessionState:
    messages: list[Message] = []
    for i in range(n // 2):
        messages.append(Message.user(f"turn {i}: please look at account {i} and tell me the balance " * 2))
        messages.append(
            Message(role="model", content=[ToolRequestPart(name="lookup", ref=f"r{i}", input={"account": i})])
            if i % 5 == 0
            else Message.model(f"The balance of account {i} is {i * 10} dollars. " * 3)
        )
    return SessionState(session_id="s", messages=messages, custom={"user": "alice"})


def measure(fn: object, runs: int = 200) -> float:
    samples: list[float] = []
    for _ in range(7):
        start = time.process_time()
        for _ in range(runs):
            fn()  # type: ignore[operator]
        samples.append((time.process_time() - start) / runs * 1e6)
    return statistics.median(samples)


def main() -> None:
    plain = state(200)
    signed = KEYS.sign_state(plain)
    sign_us = measure(lambda: KEYS.sign_state(plain))
    verify_us = measure(lambda: KEYS.verify_state(signed))
    print("signed client state, 200 messages (median of 7 x 200, CPU):")
    print(f"  sign   {sign_us:8.0f} µs per turn")
    print(f"  verify {verify_us:8.0f} µs per turn")
    print(f"  total  {sign_us + verify_us:8.0f} µs per turn")


if __name__ == "__main__":
    main()
