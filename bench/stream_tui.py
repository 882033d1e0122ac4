"""A long streamed answer in the TUI: the time until it is all on screen, per byte.

The loopback LLM (in its own process) streams Markdown answers of 100 KB, 500 KB and
2 MB, a few words per delta, sections of headings, paragraphs, lists, code and tables as
models write them. For each size, in one run:

- arrival: a bare httpx client reads the stream: the time the bytes take to arrive;
- ours: the real app, driven by Pilot, from Enter until the answer is all on screen;
- bare Textual: a Textual `Markdown` fed the same deltas through `Markdown.get_stream`
  as they arrive (what the app did before), until it shows them all, given up after
  BARE_LIMIT_SECS (it is superlinear: 2 MB would take many minutes).

Issue 27's targets: a 500 KB answer on screen within 10x its arrival time, and a 2 MB
answer not slower per byte than a 500 KB one.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
from textual.app import App, ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Markdown

from bench.targets import target
from codewhale.config import load_config
from codewhale.tui.app import CodeWhaleApp
from tests.support.llm_server import Reply
from tests.support.serve import loopback_process

SIZES = {"100 KB": 100_000, "500 KB": 500_000, "2 MB": 2_000_000}
DELTA_CHARS = 24  # a few tokens, as providers send them
BARE_LIMIT_SECS = 120.0
TARGET_ARRIVAL_RATIO = 10.0  # 500 KB on screen within this many times its arrival
TARGET_PER_BYTE_RATIO = 1.25  # 2 MB's time per byte over 500 KB's, noise allowed for


def section(number: int) -> str:
    """About 830 characters of what a model writes about a change."""
    return f"""## Step {number}: the `module_{number}` changes

Checked `calc_{number}.py` and **fixed** the rounding in the helper, which had drifted from \
the spec. The new code keeps *negative* values stable and reports [the change]\
(https://example.com/change/{number}) in the log, as before. Nothing else moved.

- `round_half_up` now handles negatives
- the tests for step {number} pass
  - including the nested case
- the docs say so

1. read the file
2. change the helper
3. run the tests

```python
def helper_{number}(value: float) -> int:
    \"\"\"Round half up, for step {number}.\"\"\"
    if value < 0:
        return -helper_{number}(-value)
    return int(value + 0.5)
```

| case | before | after |
|------|--------|-------|
| 2.5  | 2      | 3     |
| -2.5 | -2     | -3    |

> Step {number} keeps the old behaviour behind a flag.

"""


def answer(size: int) -> str:
    parts: list[str] = []
    total = number = 0
    while total < size:
        parts.append(section(number))
        total += len(parts[-1])
        number += 1
    return "".join(parts)[:size].rstrip() + "\n"


def responder(body: dict) -> Reply:
    size = int(body["messages"][-1]["content"].split()[-1])
    return Reply(text=answer(size), chunk_size=DELTA_CHARS)


async def deltas(base_url: str, size: int) -> AsyncIterator[str]:
    """The answer's text deltas as a bare client reads them off the wire."""
    request = {
        "model": "deepseek-chat",
        "stream": True,
        "messages": [{"role": "user", "content": f"answer {size}"}],
    }
    async with (
        httpx.AsyncClient(timeout=60) as client,
        client.stream("POST", f"{base_url}/chat/completions", json=request) as response,
    ):
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            for choice in json.loads(line[len("data: ") :]).get("choices", []):
                if text := choice.get("delta", {}).get("content"):
                    yield text


async def arrival(base_url: str, size: int) -> float:
    started = time.perf_counter()
    received = "".join([text async for text in deltas(base_url, size)])
    elapsed = time.perf_counter() - started
    if received != answer(size):
        raise RuntimeError("the bare client did not receive the whole answer")
    return elapsed


async def ours(workspace: Path, size: int) -> float:
    """Enter to the answer all on screen, in the real app."""
    from codewhale.tui.answer import AssistantMessage

    app = CodeWhaleApp(load_config(workspace=workspace), workspace)
    expected = answer(size)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.click("#composer")
        for char in f"answer {size}":
            await pilot.press(char if char != " " else "space")
        started = time.perf_counter()
        await pilot.press("enter")
        while True:
            await asyncio.sleep(0.02)
            cells = app.transcript.query(AssistantMessage)
            if not app.turn_running and cells and cells.last().answer == expected:
                break
        await pilot.pause()  # the last frame drawn
        elapsed = time.perf_counter() - started
        if cells.last().source != expected:
            raise RuntimeError("the app does not show the whole answer")
        await app.action_quit()
    return elapsed


class BareStream(App[None]):
    """A Textual Markdown streamed the way Textual's docs show, nothing else on screen."""

    def __init__(self, base_url: str, size: int) -> None:
        super().__init__()
        self.base_url = base_url
        self.size_ = size
        self.done = asyncio.Event()

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Markdown()

    async def stream(self) -> None:
        stream = Markdown.get_stream(self.query_one(Markdown))
        async for text in deltas(self.base_url, self.size_):
            await stream.write(text)
        await stream.stop()
        self.done.set()


async def bare(base_url: str, size: int) -> float | None:
    """Request to all on screen in a bare Textual Markdown stream; None past the limit."""
    app = BareStream(base_url, size)
    async with app.run_test(size=(120, 40)) as pilot:
        app.query_one(VerticalScroll).anchor()
        started = time.perf_counter()
        task = asyncio.create_task(app.stream())
        try:
            await asyncio.wait_for(app.done.wait(), BARE_LIMIT_SECS)
        except TimeoutError:
            task.cancel()
            return None
        await pilot.pause()
        elapsed = time.perf_counter() - started
    return elapsed


def main() -> None:
    results: dict[str, tuple[float, float, float | None]] = {}
    with (
        loopback_process("bench.stream_tui:responder") as base_url,
        tempfile.TemporaryDirectory() as scratch,
    ):
        os.environ.update(
            CODEWHALE_HOME=str(Path(scratch) / "home"),
            CODEWHALE_BASE_URL=base_url,
            DEEPSEEK_API_KEY="sk-bench-000000000000",
        )
        workspace = Path(scratch) / "ws"
        workspace.mkdir()
        for label, size in SIZES.items():
            arrived = asyncio.run(arrival(base_url, size))
            shown = asyncio.run(ours(workspace, size))
            textual = asyncio.run(bare(base_url, size))
            results[label] = (arrived, shown, textual)
            bare_text = (
                f"{textual:6.2f} s ({textual / arrived:6.1f}x arrival)"
                if textual is not None
                else f"> {BARE_LIMIT_SECS:.0f} s (given up)"
            )
            versus = (
                f"ours / bare Textual {shown / textual:5.2f}x"
                if textual is not None
                else f"ours / bare Textual < {shown / BARE_LIMIT_SECS:5.2f}x"
            )
            print(
                f"stream_tui {label:>6}: arrival {arrived:6.2f} s   ours {shown:6.2f} s"
                f" ({shown / arrived:5.1f}x arrival, {1e6 * shown / size:5.1f} µs/byte)"
                f"   bare Textual {bare_text}   {versus}",
                flush=True,
            )
    arrived, shown, _ = results["500 KB"]
    target("500 KB answer on screen / its arrival", shown / arrived, "≤", TARGET_ARRIVAL_RATIO)
    per_byte = (results["2 MB"][1] / SIZES["2 MB"]) / (shown / SIZES["500 KB"])
    target("2 MB answer's time per byte / 500 KB's", per_byte, "≤", TARGET_PER_BYTE_RATIO)


if __name__ == "__main__":
    main()
