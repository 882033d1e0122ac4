"""What persisting sub-agent records costs under bursts of 10,000 and 50,000 events.

20 children's records receive tool-call events as fast as the event loop can
deliver them (yielding between events, as real streams do). Measured twice in
one run: with the state file being written (coalesced, written off-loop) and with
persistence off. The difference is what keeping records on disk costs the event
loop; the final write, which lands in a worker thread after the burst, is outside it.
Writes are coalesced over 200 ms, so the short burst mostly measures bookkeeping and
the long one (several writes) the cost of the writes themselves.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from codewhale.engine import events
from codewhale.permissions import Mode
from codewhale.runtime import open_runtime
from codewhale.subagents.lifecycle import ChildState

BURSTS = (10_000, 50_000)
CHILDREN = 20
ROUNDS = 5


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
    started = time.perf_counter()
    for n in range(count):
        child = children[n % CHILDREN]
        if n % 2:
            event = events.ToolCallFinished(
                call_id="c", name="grep_files", ok=True, output_preview=""
            )
        else:
            event = events.ToolCallStarted(call_id="c", name="grep_files", arguments="{}")
        manager.progress.on_event(child, event)
        await asyncio.sleep(0)
    elapsed = time.perf_counter() - started
    # The trailing write lands off the event loop; wait for it outside the measurement.
    await manager.flush()
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
        await burst(True, workspace, 1000)  # warm-up
        for count in BURSTS:
            on, off = [], []
            for _ in range(ROUNDS):
                on.append(await burst(True, workspace, count))
                off.append(await burst(False, workspace, count))
            with_io, without = statistics.median(on), statistics.median(off)
            print(
                f"state_io: {count:>6} events over {CHILDREN} records  persistence on "
                f"{with_io * 1000:6.1f} ms  off {without * 1000:6.1f} ms  "
                f"extra {100 * (with_io / without - 1):+.1f}% (median of {ROUNDS})"
            )


def main() -> None:
    asyncio.run(measure())


if __name__ == "__main__":
    main()
