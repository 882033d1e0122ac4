"""The engine's own time per step, against the loopback LLM at zero latency.

A step's overhead runs from the end of one model stream (the assistant_message
event) to the next request reaching the server (its body read): tool dispatch,
message bookkeeping, session writes, request encoding and sending. Reported
beside a bare loopback round trip measured in the same run, so the ratio
survives noise. The server's own JSON parse of the request is not the engine's
time (figures before this change included it, about 1.4 ms at 320 KB bodies).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from codewhale.engine import events
from codewhale.permissions import Mode
from codewhale.runtime import open_runtime
from tests.support.llm_server import LoopbackLLM, Reply, ToolCallSpec

STEPS = 200


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(int(fraction * len(ordered)), len(ordered) - 1)]


async def bare_round_trip_ms(llm: LoopbackLLM, runs: int = 200) -> float:
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "x"}]}
    llm.respond = lambda request: Reply(text="ok")
    samples = []
    async with httpx.AsyncClient() as client:
        for _ in range(runs):
            started = time.perf_counter()
            response = await client.post(f"{llm.base_url}/chat/completions", json=body)
            response.raise_for_status()
            samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


async def engine_steps_ms(llm: LoopbackLLM, workspace: Path) -> list[float]:
    """Per step: from the end of one response to the arrival of the next request."""
    (workspace / "notes.txt").write_text("".join(f"line {i}\n" for i in range(200)))
    llm.respond = None
    for _ in range(STEPS):
        llm.enqueue(Reply(tool_calls=[ToolCallSpec("read_file", {"path": "notes.txt"})]))
    llm.enqueue(Reply(text="done"))
    finished: list[float] = []

    def on_event(event: events.Event) -> None:
        if isinstance(event, events.AssistantMessage):
            finished.append(time.time())

    session = open_runtime(workspace=workspace, mode=Mode.YOLO, emit=on_event, max_steps=STEPS + 5)
    first_request = len(llm.requests)
    await session.submit("read it many times")
    await session.close()
    arrivals = [request.ts for request in llm.requests[first_request:]]
    return [(arrivals[i + 1] - finished[i]) * 1000 for i in range(STEPS)]


async def measure() -> None:
    with tempfile.TemporaryDirectory() as scratch, LoopbackLLM() as llm:
        os.environ.update(
            CODEWHALE_HOME=str(Path(scratch) / "home"),
            CODEWHALE_BASE_URL=llm.base_url,
            DEEPSEEK_API_KEY="sk-bench-000000000000",
        )
        workspace = Path(scratch) / "ws"
        workspace.mkdir()
        bare = await bare_round_trip_ms(llm)
        steps = await engine_steps_ms(llm, workspace)
    median, p95 = statistics.median(steps), percentile(steps, 0.95)
    print(f"engine: bare loopback round trip   median {bare:6.2f} ms")
    print(
        f"engine: overhead per step ({STEPS})  median {median:6.2f} ms  p95 {p95:6.2f} ms"
        f"  ({median / bare:.2f}x a bare round trip)"
    )


def main() -> None:
    asyncio.run(measure())


if __name__ == "__main__":
    main()
