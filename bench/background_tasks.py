"""Background tasks in a run (issue 30, item 3): the model starts the cap of background
shell tasks (8) in one response; how long until all are started, and how long the
session's end takes to stop them all (every process gone, checked on the host).

Each run opens a session against the loopback model (in-process), in YOLO mode so no
approval waits; the tasks are `sleep` commands marked for finding on the host. Times are
the median of RUNS; the session's events stamp them (exec_shell's first start to its
last answer; the close's start to the last task's `killed` event).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from codewhale.permissions import Mode
from codewhale.runtime import events, open_runtime
from codewhale.sandbox import sandbox_status
from codewhale.tools.background import MAX_RUNNING
from tests.support.llm_server import LoopbackLLM, Reply, ToolCallSpec
from tests.support.processes import count_running, daemon_marker, kill_marked

RUNS = int(os.environ.get("BENCH_BACKGROUND_RUNS", "5"))
KEY = "sk-bench-000000000000"


async def one_run(workspace: Path, llm: LoopbackLLM) -> tuple[float, float, float]:
    """(ms to start all tasks, ms for the session's end to stop them, ms the close took)."""
    marker = daemon_marker()
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec("exec_shell", {"command": f"sleep {marker}", "background": True})
                for _ in range(MAX_RUNNING)
            ]
        ),
        Reply(text="all started"),
    )
    stamped: list[tuple[float, events.Event]] = []
    session = open_runtime(
        workspace=workspace,
        mode=Mode.YOLO,
        emit=lambda event: stamped.append((time.perf_counter(), event)),
    )
    try:
        await session.submit("start them")
        running = [task for task in session.background_tasks() if task.running]
        assert len(running) == MAX_RUNNING, session.background_tasks()
        assert count_running(marker) >= MAX_RUNNING
        closing = time.perf_counter()
        await session.close()
        closed = time.perf_counter()
        assert count_running(marker) == 0, "a task outlived its session"
    finally:
        kill_marked(marker)
    calls = [
        (at, event)
        for at, event in stamped
        if isinstance(event, events.ToolCallStarted | events.ToolCallFinished)
        and event.name == "exec_shell"
    ]
    started = calls[-1][0] - calls[0][0]
    killed = [
        at
        for at, event in stamped
        if isinstance(event, events.BackgroundTaskChanged) and event.status == "killed"
    ]
    assert len(killed) == MAX_RUNNING, killed
    stopped = max(killed) - closing
    return started * 1000, stopped * 1000, (closed - closing) * 1000


async def measure() -> None:
    with tempfile.TemporaryDirectory() as scratch, LoopbackLLM() as llm:
        workspace = Path(scratch) / "repo"
        workspace.mkdir()
        os.environ.update(
            CODEWHALE_HOME=str(Path(scratch) / "home"),
            CODEWHALE_BASE_URL=llm.base_url,
            DEEPSEEK_API_KEY=KEY,
        )
        runs = [await one_run(workspace, llm) for _ in range(RUNS)]
    start, stop, close = (statistics.median(figures) for figures in zip(*runs, strict=True))
    sandbox = "in the bwrap sandbox" if sandbox_status(True).available else "unsandboxed"
    print(f"background tasks ({sandbox}): {MAX_RUNNING} started in one response")
    print(f"  median of {RUNS} runs")
    print(f"  all {MAX_RUNNING} started (first exec_shell call to last answer): {start:.0f} ms")
    print(f"  all {MAX_RUNNING} stopped at the session's end: {stop:.0f} ms")
    print(f"  the whole close (children, tasks, files, client): {close:.0f} ms")


def main() -> None:
    asyncio.run(measure())


if __name__ == "__main__":
    main()
