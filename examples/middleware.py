"""Hold calls to tools outside an allow list until a person approves them."""

import asyncio

from interlock import InMemoryStore, Message, PromptAgent, Resume, ToolRequestPart, approve, tool, tool_approval
from interlock.testing import ScriptedModel

deleted: list[str] = []


@tool
def list_files(_: dict[str, str]) -> list[str]:
    """List the files."""
    return ["old.log", "notes.txt"]


@tool
def delete_file(req: dict[str, str]) -> str:
    """Delete one file."""
    deleted.append(req["path"])
    return f"deleted {req['path']}"


async def main() -> None:
    calls = Message(
        role="model",
        content=[
            ToolRequestPart(name="list_files", ref="1", input={}),
            ToolRequestPart(name="delete_file", ref="2", input={"path": "old.log"}),
        ],
    )
    model = ScriptedModel([calls, "Cleaned up old.log."])
    agent = PromptAgent(
        "ops", model, tools=[list_files, delete_file], middleware=[tool_approval(["list_files"])], store=InMemoryStore()
    )
    out = await agent.run("clean up")  # list_files ran; delete_file is held
    hold = out.interrupts[0]
    print("held:", hold.name, hold.input, "deleted so far:", deleted)
    out = await agent.run(
        resume=Resume(restart=[approve(hold)]), snapshot_id=out.snapshot_id, context={"identity": "alice"}
    )
    print(out.text, "deleted:", deleted)


asyncio.run(main())
