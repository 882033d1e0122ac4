"""Sub-agent fan-out: N children opened in one parent response, 5 model steps each.

Every model request waits 100 ms at the loopback server (run in its own process, so
it does not share our GIL), so children are I/O-bound and wall(N)/wall(1) should stay
near 1.0. Also reported: this process's CPU time per child step (engine, manager and
HTTP client together), the manager's share of it, and peak RSS.
"""

from __future__ import annotations

import asyncio
import os
import resource
import tempfile
import time
from pathlib import Path

from codewhale.permissions import Mode
from codewhale.runtime import open_runtime
from codewhale.subagents.progress import ChildProgress
from codewhale.subagents.runner import ChildRunner
from codewhale.subagents.store import SubagentStore
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.serve import loopback_process

STEPS = 5
LATENCY = 0.1
REPORT = "SUMMARY: done\nCHANGES: None.\nEVIDENCE:\n- a:1\nRISKS: none\nBLOCKERS: None."


def is_child(body: dict) -> bool:
    return any("Task:\n" in str(m.get("content")) for m in body["messages"])


def responder(body: dict) -> Reply:
    """Parent: open N children on "fan out N", then acknowledge; children: 5 steps each."""
    if not is_child(body):
        last = body["messages"][-1]
        if last.get("role") == "user" and str(last.get("content")).startswith("fan out"):
            count = int(str(last["content"]).split()[-1])
            opens = [ToolCallSpec("agent_open", {"prompt": f"job {i}"}) for i in range(count)]
            return Reply(tool_calls=opens, request_delay=LATENCY)
        return Reply(text="noted", request_delay=LATENCY)
    steps_done = sum(1 for m in body["messages"] if m.get("role") == "assistant")
    if steps_done < STEPS - 1:
        return Reply(tool_calls=[ToolCallSpec("list_dir", {})], request_delay=LATENCY)
    return Reply(text=REPORT, request_delay=LATENCY)


class ManagerClock:
    """Adds up this thread's CPU time spent inside the manager's event handlers."""

    def __init__(self) -> None:
        self.seconds = 0.0
        for owner, name in (
            (ChildProgress, "on_event"),
            (ChildRunner, "_finish"),
            (ChildRunner, "_finish_stopped"),
            (ChildRunner, "_settle"),
        ):
            self._wrap(owner, name)
        original = SubagentStore.snapshot

        def snapshot(store, records):
            started = time.thread_time()
            try:
                return original(store, records)
            finally:
                self.seconds += time.thread_time() - started

        SubagentStore.snapshot = snapshot

    def _wrap(self, owner: type, name: str) -> None:
        original = getattr(owner, name)

        def timed(instance, *args, **kwargs):
            started = time.thread_time()
            try:
                return original(instance, *args, **kwargs)
            finally:
                self.seconds += time.thread_time() - started

        setattr(owner, name, timed)


async def run_fanout(workspace: Path, children: int, clock: ManagerClock):
    config = Path(os.environ["CODEWHALE_HOME"]) / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("[subagents]\nmax_concurrent = 20\n")
    session = open_runtime(workspace=workspace, mode=Mode.YOLO)
    cpu_before, manager_before = time.process_time(), clock.seconds
    started = time.perf_counter()
    await session.submit(f"fan out {children}")
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu_before
    manager_cpu = clock.seconds - manager_before
    records = session.manager.records()
    await session.close()
    assert sum(r["status"] == "completed" for r in records) == children, records
    return wall, cpu, manager_cpu


async def measure() -> None:
    clock = ManagerClock()
    results = {}
    with loopback_process("bench.fanout:responder") as base_url:
        for n in (1, 1, 5, 20):  # the first N=1 run is a warm-up (imports, connections)
            with tempfile.TemporaryDirectory() as scratch:
                os.environ.update(
                    CODEWHALE_HOME=str(Path(scratch) / "home"),
                    CODEWHALE_BASE_URL=base_url,
                    DEEPSEEK_API_KEY="sk-bench-000000000000",
                )
                workspace = Path(scratch) / "ws"
                workspace.mkdir()
                results[n] = await run_fanout(workspace, n, clock)
    base = results[1][0]
    for n, (wall, cpu, manager_cpu) in results.items():
        steps = n * STEPS
        print(
            f"fanout: N={n:<2}  wall {wall:6.3f} s  wall(N)/wall(1) {wall / base:5.2f}"
            f"  CPU per child step {cpu * 1000 / steps:5.2f} ms"
            f" (manager {manager_cpu * 1000 / steps:5.2f} ms)"
        )
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"fanout: peak RSS {peak_mb:.0f} MB (this process; the server runs apart)")


def main() -> None:
    asyncio.run(measure())


if __name__ == "__main__":
    main()
