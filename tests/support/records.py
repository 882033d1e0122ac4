"""Sub-agent records for state tests: made, moved along, and read back bare."""

from __future__ import annotations

import json

from codewhale.subagents.lifecycle import ChildState, apply_move
from codewhale.subagents.records import WorkerRecord
from codewhale.subagents.state_log import CoalescedWriter
from codewhale.subagents.store import SubagentStore


def record(n: int) -> WorkerRecord:
    return WorkerRecord(
        run_id=f"run_{n}",
        agent_id=f"agent_{n:08x}",
        name=f"agent_{n:08x}",
        nickname=f"Whale-{n}",
        objective="Read the parser and report. " * 20,
        description="parser",
        type="explore",
        role="explore",
        model="m",
        workspace="/w",
        git_branch=None,
        session_boot_id="boot_test",
    )


def started(n: int) -> WorkerRecord:
    new = record(n)
    new.add_event("queued", "queued")
    apply_move(new, ChildState.STARTING, "started")
    apply_move(new, ChildState.RUNNING)
    return new


def step(one: WorkerRecord, tool: str) -> None:
    """What a child's model step does to its record."""
    apply_move(one, ChildState.RUNNING_TOOL, tool, tool=tool)
    one.steps_taken += 1
    one.usage["input"] += 1000
    apply_move(one, ChildState.RUNNING)


def bare_file(store: SubagentStore) -> dict:
    """What a reader that knows nothing of the journal sees."""
    return json.loads(store.state_file.read_text())


async def coalesced(writer: CoalescedWriter) -> None:
    """Wait for the write that marking a change scheduled."""
    assert writer._task is not None
    await writer._task
