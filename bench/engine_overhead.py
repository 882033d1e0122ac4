"""The engine's own time per step at 10 and at 1,000 messages, against the loopback LLM.

A step's overhead runs from the end of one model stream (the assistant_message
event) to the next request reaching the server (its body read): tool dispatch,
message bookkeeping, session writes, request encoding and sending. Each size is a
session continued from a file of that many messages (the `--continue` path),
then run for STEPS read_file steps with compaction off; the history repeats the
same kind of step (about 600 bytes a message, a little over real sessions' 500:
1,000 messages send 0.6 MB). Reported beside a bare loopback round trip measured
in the same run, so the ratio survives noise. The server's own JSON parse of the
request is not the engine's time.
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
from codewhale.sessions.store import SessionStore
from codewhale.tools.base import ToolContext
from codewhale.tools.files import ReadFile
from tests.support.llm_server import LoopbackLLM, Reply, ToolCallSpec

SIZES = (10, 1_000)
STEPS = 30
ROUNDS = 5
FILE_LINES = 20


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
    llm.respond = None
    return statistics.median(samples)


async def seed_session(workspace: Path, home: Path, size: int) -> None:
    """A session file of `size` messages: the system prompt, then read_file steps."""
    output = await ReadFile().run(
        {"path": "notes.txt"}, ToolContext(workspace=workspace, session_id="seed")
    )
    messages: list[dict[str, object]] = [
        {"role": "system", "content": "You are CodeWhale. " * 200},
        {"role": "user", "content": "read it many times"},
    ]
    while len(messages) < size:
        call_id = f"seed_{len(messages)}"
        arguments = '{"path": "notes.txt"}'
        function = {"name": "read_file", "arguments": arguments}
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call_id, "type": "function", "function": function}],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": output.output})
    _, writer = SessionStore(home / "data").create(workspace.resolve(), "m")
    writer.record_messages(messages[:size])
    writer.close()


async def engine_steps_ms(llm: LoopbackLLM, workspace: Path) -> tuple[list[float], int]:
    """Per step: from the end of one response to the arrival of the next request."""
    for _ in range(STEPS):
        llm.enqueue(Reply(tool_calls=[ToolCallSpec("read_file", {"path": "notes.txt"})]))
    llm.enqueue(Reply(text="done"))
    finished: list[float] = []

    def on_event(event: events.Event) -> None:
        if isinstance(event, events.AssistantMessage):
            finished.append(time.time())

    session = open_runtime(
        workspace=workspace,
        # The steps' own cost at this size: no compaction shrinking the conversation.
        overrides={"context": {"auto_compact": False}},
        mode=Mode.YOLO,
        emit=on_event,
        continue_latest=True,
        max_steps=STEPS + 5,
    )
    first_request = len(llm.requests)
    await session.submit("once more")
    size = len(session.messages)
    await session.close()
    arrivals = [request.ts for request in llm.requests[first_request:]]
    # One request per step and nothing else (a compaction's summary call would pair the
    # wrong times).
    assert len(arrivals) == len(finished) == STEPS + 1, (len(arrivals), len(finished))
    return [(arrivals[i + 1] - finished[i]) * 1000 for i in range(STEPS)], size


async def measure() -> None:
    with tempfile.TemporaryDirectory() as scratch, LoopbackLLM() as llm:
        home = Path(scratch) / "home"
        os.environ.update(
            CODEWHALE_HOME=str(home),
            CODEWHALE_BASE_URL=llm.base_url,
            DEEPSEEK_API_KEY="sk-bench-000000000000",
        )
        workspaces = {}
        for size in SIZES:
            workspace = workspaces[size] = Path(scratch) / f"ws{size}"
            workspace.mkdir()
            (workspace / "notes.txt").write_text(
                "".join(f"line {i}: some text of a source file\n" for i in range(FILE_LINES))
            )
            await seed_session(workspace, home, size)
        await engine_steps_ms(llm, workspaces[SIZES[0]])  # warm-up (imports, first connection)
        bare: list[float] = []
        steps: dict[int, list[float]] = {size: [] for size in SIZES}
        ends: dict[int, int] = {}
        # Interleaved rounds: a noisy neighbour slows both figures, not one.
        for _ in range(ROUNDS):
            bare.append(await bare_round_trip_ms(llm))
            for size in SIZES:
                await seed_session(workspaces[size], home, size)
                samples, ends[size] = await engine_steps_ms(llm, workspaces[size])
                steps[size] += samples
    round_trip = statistics.median(bare)
    print(f"engine: bare loopback round trip          median {round_trip:6.2f} ms")
    for size in SIZES:
        median, p95 = statistics.median(steps[size]), percentile(steps[size], 0.95)
        label = f"{size}->{ends[size]} messages"
        print(
            f"engine: overhead per step {label:<19} median {median:6.2f} ms  p95 {p95:6.2f} ms"
            f"  ({median / round_trip:.2f}x a bare round trip)"
        )


def main() -> None:
    asyncio.run(measure())


if __name__ == "__main__":
    main()
