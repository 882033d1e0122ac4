"""UI responsiveness while 20 sub-agents stream: keystroke-to-screen latency and CPU share.

The loopback LLM runs in its own process; each child streams 100 tokens at 50 tokens/s.
While they stream, keys are typed into the composer; a keystroke's latency is the time
from posting the key event to the composer until its text shows the character.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from textual import events

from codewhale.config import load_config
from codewhale.tui.app import CodeWhaleApp
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.serve import loopback_process

CHILDREN = 20
TOKENS = 100
REPORT = "SUMMARY: done\nCHANGES: None.\nEVIDENCE:\n- a:1\nRISKS: none\nBLOCKERS: None."


def responder(body: dict) -> Reply:
    if any("Assignment metadata" in str(m.get("content")) for m in body["messages"]):
        return Reply(text=[f"tok{i} " for i in range(TOKENS)] + [REPORT], chunk_delay=0.02)
    if body["messages"][-1].get("content") == "fan out":
        opens = [ToolCallSpec("agent_open", {"prompt": f"job {i}"}) for i in range(CHILDREN)]
        return Reply(tool_calls=opens)
    return Reply(text="noted")


async def measure(workspace: Path) -> tuple[list[float], float, float]:
    app = CodeWhaleApp(load_config(workspace=workspace), workspace)
    latencies: list[float] = []
    async with app.run_test(size=(140, 50)) as pilot:
        await pilot.click("#composer")
        for char in "fan out":
            await pilot.press(char if char != " " else "space")
        await pilot.press("enter")
        cpu_before, wall_before = time.process_time(), time.perf_counter()
        while not app.runtime.manager.has_live_children():
            await pilot.pause(0.01)
        composer = app.composer
        while app.runtime.manager.has_live_children():
            before = len(composer.text)
            started = time.perf_counter()
            composer.post_message(events.Key("x", "x"))
            while len(composer.text) == before:
                await asyncio.sleep(0.0005)
            latencies.append((time.perf_counter() - started) * 1000)
            await asyncio.sleep(0.03)
        wall = time.perf_counter() - wall_before
        cpu = time.process_time() - cpu_before
        await app.action_quit()
    return latencies, cpu / wall, wall


def main() -> None:
    with (
        loopback_process("bench.ui_load:responder") as base_url,
        tempfile.TemporaryDirectory() as scratch,
    ):
        os.environ.update(
            CODEWHALE_HOME=str(Path(scratch) / "home"),
            CODEWHALE_BASE_URL=base_url,
            DEEPSEEK_API_KEY="sk-bench-000000000000",
        )
        workspace = Path(scratch) / "ws"
        workspace.mkdir()
        latencies, cpu_share, wall = asyncio.run(measure(workspace))
    latencies.sort()
    p95 = latencies[min(int(0.95 * len(latencies)), len(latencies) - 1)]
    print(
        f"ui_load: {CHILDREN} children streaming for {wall:.1f} s, {len(latencies)} keystrokes"
        f"  latency p50 {statistics.median(latencies):5.1f} ms  p95 {p95:5.1f} ms"
        f"  app CPU {100 * cpu_share:4.0f}% of one core"
    )


if __name__ == "__main__":
    main()
