"""What persisting sub-agent records costs under bursts of 10,000 and 50,000 events.

A workspace with history: the state file holds 200 finished records of an earlier
session, each with its 128 events, beside the 20 children of this one. The
children's records receive the events of model steps (text, usage, the answer, a
tool call started and finished), yielding between events as real streams do and
pausing a millisecond every PACE_EVERY events, so even the short burst spans several
of the 200 ms windows changes are coalesced over: both bursts measure the writes made
during the stream, not only the bookkeeping. Their own event lists fill up and churn.
Measured in one run, in alternating order, with the state kept on disk and with
persistence off. The difference is what keeping records on disk costs while events
stream, the final write of the burst included (timed to its flush); the snapshot of
the records as they start (before the burst) is outside it.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from bench.targets import target
from codewhale.engine import events
from codewhale.permissions import Mode
from codewhale.runtime import open_runtime
from codewhale.subagents.lifecycle import ChildState
from codewhale.subagents.records import MAX_EVENTS, WorkerRecord
from codewhale.subagents.store import SubagentStore

BURSTS = (10_000, 50_000)
CHILDREN = 20
EARLIER_RECORDS = 200
ROUNDS = 15
# A pause of PACE_SECS every PACE_EVERY events: 10,000 events then take over a second.
PACE_EVERY, PACE_SECS = 20, 0.002
# One model step of a child, as its engine reports it.
STEP = (
    events.AssistantDelta(text="Looking at the parser next. "),
    events.UsageEvent(input=12_000, output=300, cache_hit=11_000, cache_miss=1_000),
    events.AssistantMessage(content="Looking at the parser next. ", tool_calls=1),
    events.ToolCallStarted(call_id="c", name="grep_files", arguments="{}", summary="parse_"),
    events.ToolCallFinished(call_id="c", name="grep_files", ok=True, output_preview="12 hits"),
)


def seed_earlier_session(workspace: Path) -> None:
    """The state file a long-used workspace has: finished records with full event lists."""
    agents = []
    for i in range(EARLIER_RECORDS):
        record = WorkerRecord(
            run_id=f"run_{i:012x}",
            agent_id=f"agent_{i:08x}",
            name=f"agent_{i:08x}",
            nickname="Moby",
            objective="Find where the config loader reads the user file and report it. " * 4,
            description="config loader",
            type="explore",
            role="explore",
            model="deepseek-v4-flash",
            workspace=str(workspace),
            git_branch="main",
            session_boot_id="boot_earlier0000",
            status="completed",
            worker_status="completed",
        )
        for step in range(MAX_EVENTS):
            record.add_event("running_tool", "grep_files", step=step, tool="grep_files")
        record.result = "SUMMARY: found it.\n" * 20
        agents.append(record.to_json())
    state = SubagentStore(workspace).state_file
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(json.dumps({"schema_version": 1, "agents": agents}))


async def burst(persist: bool, workspace: Path, count: int) -> float:
    session = open_runtime(workspace=workspace, mode=Mode.YOLO)
    manager = session.manager
    if not persist:
        manager.state_error = "persistence off for this measurement"
    children = []
    for i in range(CHILDREN):
        # Children are built but never started: only their records see events.
        child = manager.builder.create(_spawn(manager, f"child {i}"), manager.root)
        manager.roster.add(child)
        manager.lifecycle.enter(child.record, "queued")
        manager.lifecycle.move(child.record, ChildState.STARTING)
        children.append(child)
    # The records as they start are written before the burst: the burst is the events.
    await manager.flush()
    started = time.perf_counter()
    for n in range(count):
        child = children[n % CHILDREN]
        manager.progress.on_event(child, STEP[n // CHILDREN % len(STEP)])
        await asyncio.sleep(PACE_SECS if n % PACE_EVERY == 0 else 0)
    # The burst's last changes are part of its cost: timed until they are on disk.
    await manager.flush()
    elapsed = time.perf_counter() - started
    for child in children:
        assert child.engine is not None
        await child.engine.client.aclose()
    manager.roster.children.clear()
    await session.close()
    return elapsed


def _spawn(manager, prompt: str):
    from codewhale.subagents.spawn import parse_spawn

    return parse_spawn(
        {"prompt": prompt},
        workspace=manager.workspace,
        definitions=manager.definitions,
        known_tools=manager.known_tools,
        config=manager.config,
        settings=manager.settings,
    )


async def measure() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        os.environ.update(
            CODEWHALE_HOME=str(Path(scratch) / "home"),
            CODEWHALE_BASE_URL="http://127.0.0.1:9/v1",
            DEEPSEEK_API_KEY="sk-bench-000000000000",
        )
        workspace = Path(scratch) / "ws"
        workspace.mkdir()
        seed_earlier_session(workspace)
        await burst(True, workspace, 1000)  # warm-up
        for count in BURSTS:
            on, off, extra = [], [], []
            for round_ in range(ROUNDS):
                # Alternating which goes first: a neighbour's load slows both alike.
                order = (True, False) if round_ % 2 else (False, True)
                times = {persist: await burst(persist, workspace, count) for persist in order}
                on.append(times[True])
                off.append(times[False])
                extra.append(times[True] / times[False] - 1)
            print(
                f"state_io: {count:>6} events over {CHILDREN} records  persistence on "
                f"{statistics.median(on) * 1000:6.1f} ms  "
                f"off {statistics.median(off) * 1000:6.1f} ms"
                f"  extra {100 * statistics.median(extra):+.1f}% (median of {ROUNDS} pairs)"
            )
            if count == 10_000:
                overhead = 100 * statistics.median(extra)
                target("state I/O overhead, 10,000-event burst", overhead, "<", 5, "%")


def main() -> None:
    asyncio.run(measure())


if __name__ == "__main__":
    main()
