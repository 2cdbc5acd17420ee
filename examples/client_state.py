"""Client-managed state: without a store the caller carries the state, signed so it cannot be forged."""

import asyncio

from interlock import PromptAgent
from interlock.agents import Host
from interlock.errors import PermissionDeniedError
from interlock.interrupts import Keyring
from interlock.records import SessionState
from interlock.testing import ScriptedModel


async def main() -> None:
    model = ScriptedModel(["Hi Ann.", "You are Ann."])
    agent = PromptAgent(
        "greeter", model, host=Host(state_signing=Keyring({"k1": "a long random secret, 32 bytes or more"}))
    )
    first = await agent.run("I am Ann")
    assert first.state is not None and first.snapshot_id is None  # the state travels with the output
    second = await agent.run("Who am I?", state=first.state)
    print(second.text, "| history:", len(second.state.messages if second.state else []), "messages")

    forged = SessionState(messages=first.state.messages[:1], custom=first.state.custom)
    try:
        await agent.run("Who am I?", state=forged)  # refused before the model is called
    except PermissionDeniedError as refused:
        print("forged state:", refused.status, "| model calls:", len(model.requests))
    else:
        print("forged state: accepted")


asyncio.run(main())
