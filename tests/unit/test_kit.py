"""The fixture kit (tests/conftest.py): the bank agent pauses on each store of the tier and resumes once approved."""

from __future__ import annotations

from banking import APPROVE

from interlock import PromptAgent, SessionStore


async def test_the_bank_agent_pauses_for_approval_and_finishes_once_approved(
    bank_agent: PromptAgent, store: SessionStore
) -> None:
    paused = await bank_agent.run("pay bob 5")
    assert paused.finish_reason == "interrupted" and paused.snapshot_id, paused.error
    assert [i.name for i in paused.interrupts] == ["transfer"]
    done = await bank_agent.run(resume=APPROVE, snapshot_id=paused.snapshot_id)
    assert done.finish_reason == "stop" and done.text == "done", done.error
    assert await store.load(done.snapshot_id or "") is not None


def test_no_two_test_modules_share_a_name() -> None:
    """pytest imports every tier's modules by their base name (rootdir-relative pythonpath): a repeat is an error."""
    import collections
    import pathlib

    tests = pathlib.Path(__file__).resolve().parents[1]
    names = collections.Counter(path.name for path in tests.rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []
